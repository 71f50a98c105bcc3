// Package burst is the self-test the framework examples share: send a few
// requests at once and print what came back.
package burst

import (
	"fmt"
	"io"
	"net/http"
)

// Run sends n GET requests to url, one after another with no pause, and
// prints each status with its RateLimit and Retry-After headers.
func Run(out io.Writer, url string, n int) error {
	for i := 1; i <= n; i++ {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		fmt.Fprintf(out, "request %d: %d  RateLimit: %s  Retry-After: %s\n", i, resp.StatusCode,
			resp.Header.Get("RateLimit"), resp.Header.Get("Retry-After"))
	}
	return nil
}
