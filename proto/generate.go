// Package proto holds gitfleet's protocol definitions. The generated Go code
// is committed; regenerate it with `go generate ./proto` (needs protoc,
// protoc-gen-go and protoc-gen-go-grpc on PATH; see docs/how-it-works.md).
package proto

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative gitfleet/v1/fleet.proto
