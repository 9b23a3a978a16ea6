// Package version holds gitfleet's version, set at build time with
// -ldflags "-X github.com/gitfleet/gitfleet/internal/version.Version=v1.2.3".
package version

// Version is the release version of this build.
var Version = "0.1.0-dev"
