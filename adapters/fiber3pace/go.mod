module github.com/pedreviljoen/gopherpace/adapters/fiber3pace

go 1.26

require (
	github.com/gofiber/fiber/v3 v3.1.0
	github.com/pedreviljoen/gopherpace/core v0.0.0
	github.com/valyala/fasthttp v1.69.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/andybalholm/brotli v1.2.0 // indirect
	github.com/gofiber/schema v1.7.0 // indirect
	github.com/gofiber/utils/v2 v2.0.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/klauspost/compress v1.18.4 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/tinylib/msgp v1.6.3 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	golang.org/x/crypto v0.48.0 // indirect
	golang.org/x/net v0.50.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
	golang.org/x/text v0.34.0 // indirect
)

replace github.com/pedreviljoen/gopherpace/core => ../../core
