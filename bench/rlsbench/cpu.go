package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times: USER_HZ, 100 on Linux.
const clockTick = 10 * time.Millisecond

// cpuTime is the CPU time a process has used, user and system, from
// /proc/<pid>/stat (fields 14 and 15, after the parenthesised command).
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	fields := strings.Fields(s[end+1:])
	// fields[0] is the state (field 3); utime and stime are fields 14, 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var total time.Duration
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		total += time.Duration(n) * clockTick
	}
	return total, nil
}

// cpuMeter reads the CPU time of a server's processes (envoyproxy/
// ratelimit and its Redis, say) before and after a run.
type cpuMeter struct {
	pids   []int
	before []time.Duration
}

func startCPU(pids ...int) (*cpuMeter, error) {
	m := &cpuMeter{pids: pids}
	for _, p := range pids {
		t, err := cpuTime(p)
		if err != nil {
			return nil, err
		}
		m.before = append(m.before, t)
	}
	return m, nil
}

// used is the CPU time each process used since startCPU.
func (m *cpuMeter) used() ([]time.Duration, error) {
	out := make([]time.Duration, len(m.pids))
	for i, p := range m.pids {
		t, err := cpuTime(p)
		if err != nil {
			return nil, err
		}
		out[i] = t - m.before[i]
	}
	return out, nil
}

// sum is the CPU time of all of a server's processes.
func sum(used []time.Duration) time.Duration {
	var t time.Duration
	for _, u := range used {
		t += u
	}
	return t
}
