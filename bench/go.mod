module github.com/pedreviljoen/gopherpace/bench

go 1.26.0

require (
	github.com/pedreviljoen/gopherpace/core v0.0.0
	golang.org/x/time v0.16.0
)

replace github.com/pedreviljoen/gopherpace/core => ../core
