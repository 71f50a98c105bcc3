module github.com/pedreviljoen/gopherpace/core

go 1.26
