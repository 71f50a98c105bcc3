package rlserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/pedreviljoen/gopherpace/adapters/rlserver"
)

func ExampleParseRate() {
	for _, s := range []string{"10", "0.5", "100/m", "30/10s"} {
		r, _ := rlserver.ParseRate(s)
		fmt.Printf("%s: %d every %v, %.2f a second\n", s, r.Tokens, r.Per, r.PerSecond())
	}
	// Output:
	// 10: 10 every 1s, 10.00 a second
	// 0.5: 1 every 2s, 0.50 a second
	// 100/m: 100 every 1m0s, 1.67 a second
	// 30/10s: 30 every 10s, 3.00 a second
}

// Run serves what ParseFlags read until its context ends; here one
// request to /allow, at 30 a minute in bursts of 2.
func ExampleRun() {
	c, err := rlserver.ParseFlags([]string{"-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-rate", "30/m", "-burst", "2"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addr := make(chan string, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	go func() { done <- rlserver.Run(ctx, c, log, func(h, _ string) { addr <- h }, nil) }()
	var httpAddr string
	select {
	case httpAddr = <-addr:
	case err := <-done: // it could not start
		stop()
		fmt.Println(err)
		return
	}
	resp, err := http.Get("http://" + httpAddr + "/allow?key=alice")
	if err != nil {
		fmt.Println(err)
		stop()
		<-done
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.Status, " ", string(body))
	stop()
	fmt.Println(<-done)
	// Output:
	// 200 OK {"allowed":true,"remaining":1,"limit":2,"rate":0.5}
	// <nil>
}
