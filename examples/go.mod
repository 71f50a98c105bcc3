module github.com/pedreviljoen/gopherpace/examples

go 1.26

require github.com/pedreviljoen/gopherpace/core v0.0.0

replace github.com/pedreviljoen/gopherpace/core => ../core
