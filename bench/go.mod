module github.com/pedreviljoen/gopherpace/bench

go 1.26.0

require (
	github.com/juju/ratelimit v1.0.2
	github.com/pedreviljoen/gopherpace/adapters/memberpace v0.0.0
	github.com/pedreviljoen/gopherpace/core v0.0.0
	github.com/pedreviljoen/gopherpace/seeds v0.0.0
	github.com/sethvargo/go-limiter v0.7.1
	github.com/throttled/throttled/v2 v2.15.0
	github.com/ulule/limiter/v3 v3.11.2
	go.uber.org/ratelimit v0.3.1
	golang.org/x/time v0.16.0
)

require (
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.7.0 // indirect
	github.com/hashicorp/go-msgpack/v2 v2.1.5 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-sockaddr v1.0.7 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/hashicorp/memberlist v0.7.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/sean-/seed v0.0.0-20170313163322-e2103e2c3529 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace (
	github.com/pedreviljoen/gopherpace/adapters/memberpace => ../adapters/memberpace
	github.com/pedreviljoen/gopherpace/core => ../core
	github.com/pedreviljoen/gopherpace/seeds => ../seeds
)
