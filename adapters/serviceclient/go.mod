module github.com/pedreviljoen/gopherpace/adapters/serviceclient

go 1.26.0
