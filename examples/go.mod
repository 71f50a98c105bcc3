module github.com/pedreviljoen/gopherpace/examples

go 1.26.0

require (
	github.com/gin-gonic/gin v1.12.0
	github.com/goccy/go-yaml v1.19.2
	github.com/gofiber/fiber/v2 v2.52.15
	github.com/gofiber/fiber/v3 v3.1.0
	github.com/labstack/echo/v4 v4.16.5
	github.com/labstack/echo/v5 v5.4.4
	github.com/pedreviljoen/gopherpace/adapters/echo5pace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/echopace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/fiber3pace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/fiberpace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/ginpace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/grpcpace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/memberpace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/otelpace v0.0.0
	github.com/pedreviljoen/gopherpace/adapters/prompace v0.0.0
	github.com/pedreviljoen/gopherpace/core v0.0.0
	github.com/pedreviljoen/gopherpace/seeds v0.0.0
	github.com/prometheus/client_golang v1.25.0
	go.opentelemetry.io/otel v1.47.0
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1
	google.golang.org/grpc v1.85.0
)

require (
	github.com/andybalholm/brotli v1.2.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/bytedance/gopkg v0.1.3 // indirect
	github.com/bytedance/sonic v1.15.0 // indirect
	github.com/bytedance/sonic/loader v0.5.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/cloudwego/base64x v0.1.6 // indirect
	github.com/gabriel-vasile/mimetype v1.4.12 // indirect
	github.com/gin-contrib/sse v1.1.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-playground/locales v0.14.1 // indirect
	github.com/go-playground/universal-translator v0.18.1 // indirect
	github.com/go-playground/validator/v10 v10.30.1 // indirect
	github.com/goccy/go-json v0.10.5 // indirect
	github.com/gofiber/schema v1.7.0 // indirect
	github.com/gofiber/utils/v2 v2.0.2 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.7.0 // indirect
	github.com/hashicorp/go-msgpack/v2 v2.1.5 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-sockaddr v1.0.7 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/hashicorp/memberlist v0.7.0 // indirect
	github.com/json-iterator/go v1.1.12 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/klauspost/cpuid/v2 v2.3.0 // indirect
	github.com/labstack/gommon v0.5.0 // indirect
	github.com/leodido/go-urn v1.4.0 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.22 // indirect
	github.com/mattn/go-runewidth v0.0.16 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/modern-go/concurrent v0.0.0-20180306012644-bacd9c7ef1dd // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pelletier/go-toml/v2 v2.2.4 // indirect
	github.com/philhofer/fwd v1.2.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/quic-go/qpack v0.6.0 // indirect
	github.com/quic-go/quic-go v0.59.0 // indirect
	github.com/rivo/uniseg v0.2.0 // indirect
	github.com/sean-/seed v0.0.0-20170313163322-e2103e2c3529 // indirect
	github.com/tinylib/msgp v1.6.3 // indirect
	github.com/twitchyliquid64/golang-asm v0.15.1 // indirect
	github.com/ugorji/go/codec v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fasthttp v1.69.0 // indirect
	github.com/valyala/fasttemplate v1.2.2 // indirect
	go.mongodb.org/mongo-driver/v2 v2.5.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/arch v0.22.0 // indirect
	golang.org/x/crypto v0.57.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/pedreviljoen/gopherpace/adapters/echo5pace => ../adapters/echo5pace
	github.com/pedreviljoen/gopherpace/adapters/echopace => ../adapters/echopace
	github.com/pedreviljoen/gopherpace/adapters/fiber3pace => ../adapters/fiber3pace
	github.com/pedreviljoen/gopherpace/adapters/fiberpace => ../adapters/fiberpace
	github.com/pedreviljoen/gopherpace/adapters/ginpace => ../adapters/ginpace
	github.com/pedreviljoen/gopherpace/adapters/grpcpace => ../adapters/grpcpace
	github.com/pedreviljoen/gopherpace/adapters/memberpace => ../adapters/memberpace
	github.com/pedreviljoen/gopherpace/adapters/otelpace => ../adapters/otelpace
	github.com/pedreviljoen/gopherpace/adapters/prompace => ../adapters/prompace
	github.com/pedreviljoen/gopherpace/core => ../core
	github.com/pedreviljoen/gopherpace/seeds => ../seeds
)
