package serviceclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/pedreviljoen/gopherpace/adapters/serviceclient"
)

func ExampleClient_Allow() {
	// A stand-in for gopherpace serve, which allows tenant-a once.
	allowed := false
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed {
			allowed = true
			fmt.Fprintln(w, `{"allowed":true,"remaining":0,"limit":1,"rate":1}`)
			return
		}
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintln(w, `{"allowed":false,"remaining":0,"limit":1,"rate":1,"retry_after_ms":1000}`)
	}))
	defer svc.Close()

	c, err := serviceclient.New(svc.URL)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		r := c.Allow(ctx, "tenant-a", 1, serviceclient.FailClosed)
		fmt.Println(r.Allowed, r.Cached, r.Err)
	}
	// Output:
	// true false <nil>
	// false false <nil>
	// false true <nil>
}
