module github.com/gmproxy/gmproxy

go 1.26.0

require (
	github.com/emmansun/gmsm v0.44.1 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/tjfoc/gmsm v1.4.1 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/net v0.62.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
