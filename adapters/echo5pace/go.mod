module github.com/pedreviljoen/gopherpace/adapters/echo5pace

go 1.26

require (
	github.com/labstack/echo/v5 v5.4.4
	github.com/pedreviljoen/gopherpace/core v0.0.0
	go.uber.org/goleak v1.3.0
)

require golang.org/x/time v0.15.0 // indirect

replace github.com/pedreviljoen/gopherpace/core => ../../core
