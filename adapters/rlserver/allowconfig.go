package rlserver

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

// The HTTP API's limits (/allow) can come from a file instead of -rate,
// -burst and -limits, for limits too many or too long for a command line:
//
//	rate: 10/s          # keys without a limit of their own, as -rate
//	burst: 20           # their bucket size, as -burst
//	keys:
//	  tenant-a: {rate: 100/m, burst: 50}
//	  tenant-b: {rate: 5000/h}   # burst: the rate's tokens
//
// A flag given (or its GOPHERPACE_* variable) wins over the file; a key
// in both -limits and the file is an error.

// maxAllowConfig bounds the file.
const maxAllowConfig = 4 << 20

type allowFile struct {
	Rate  string `yaml:"rate"`
	Burst int64  `yaml:"burst"`
	Keys  map[string]struct {
		Rate  string `yaml:"rate"`
		Burst int64  `yaml:"burst"`
	} `yaml:"keys"`
}

// readAllowConfig reads the HTTP API's limits from path.
func readAllowConfig(path string) (rate *Rate, burst int64, limits map[string]Limit, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxAllowConfig+1))
	if err != nil {
		return nil, 0, nil, err
	}
	if len(data) > maxAllowConfig {
		return nil, 0, nil, fmt.Errorf("%s: over %d MiB", path, maxAllowConfig>>20)
	}
	var a allowFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&a); err != nil && err != io.EOF {
		return nil, 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	if a.Rate != "" {
		r, err := ParseRate(a.Rate)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%s: rate: %w", path, err)
		}
		rate = &r
	}
	if a.Burst < 0 {
		return nil, 0, nil, fmt.Errorf("%s: burst %d is below zero", path, a.Burst)
	}
	limits = make(map[string]Limit, len(a.Keys))
	for k, v := range a.Keys {
		if k == "" {
			return nil, 0, nil, fmt.Errorf("%s: an empty key", path)
		}
		r, err := ParseRate(v.Rate)
		if err != nil {
			return nil, 0, nil, fmt.Errorf("%s: key %q: rate: %w", path, k, err)
		}
		b := v.Burst
		if b < 0 {
			return nil, 0, nil, fmt.Errorf("%s: key %q: burst %d is below zero", path, k, b)
		}
		if b == 0 {
			b = r.Tokens
		}
		limits[k] = Limit{Rate: r, Burst: b}
	}
	return rate, a.Burst, limits, nil
}
