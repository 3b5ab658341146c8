module github.com/hotpath-dev/hotpath/tests/peers

go 1.26.0

require (
	github.com/fasthttp/router v1.5.4
	github.com/valyala/fasthttp v1.78.0
	golang.org/x/sys v0.50.0
)

require github.com/savsgio/gotils v0.0.0-20240704082632-aef3928b8a38 // indirect

require (
	github.com/goccy/go-json v0.12.0
	github.com/hotpath-dev/hotpath v0.0.0
	github.com/json-iterator/go v1.1.12
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/modern-go/concurrent v0.0.0-20180228061459-e0a39a4cb421 // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	github.com/valyala/fastjson v1.6.10
)

replace github.com/hotpath-dev/hotpath => ../..
