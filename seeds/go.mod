module github.com/pedreviljoen/gopherpace/seeds

go 1.26
