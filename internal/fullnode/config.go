package fullnode

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/gitfleet/gitfleet/internal/api"
	"github.com/gitfleet/gitfleet/internal/gitserve"
	"github.com/gitfleet/gitfleet/internal/node"
)

// Config configures a full node: its runtime's settings, and its own.
type Config struct {
	node.Config
	// FullToken admits the full node (the coordinator's --full-token).
	FullToken string
	// TunnelTLS, when set, is the configuration of the tunnel listener.
	TunnelTLS *tls.Config
	// HTTPAddr is where the public is served (git, API, console); TunnelAddr
	// where partial nodes dial in, and TunnelAdvertise the address given to
	// them (default TunnelAddr). PublicURL is where the public reaches the
	// HTTP (default its address).
	HTTPAddr        string
	TunnelAddr      string
	TunnelAdvertise string
	PublicURL       string
	// HTTPListener and TunnelListener, when set, are HTTPAddr and
	// TunnelAddr already bound (the node then owns them): a process that
	// runs several roles binds every port before it starts any.
	HTTPListener, TunnelListener net.Listener
	// FullDiskPolicy is what yields above the disk's high water:
	// FullDiskRefuseNew (default) or FullDiskRefuseAll (fulldisk.go).
	FullDiskPolicy string
	// MismatchRevoke is how many forged tips a partial node may serve
	// before the full node revokes it (0: never).
	MismatchRevoke int
	// StaleRevoke is how many stale reports (a repository reported
	// unchanged after its upstream changed) a partial node may make
	// before the full node revokes it (0: never).
	StaleRevoke int
	// SpotCheckPerHour is how many repositories the full node checks
	// against their upstreams itself each hour, the oldest verified_at
	// first (0: none).
	SpotCheckPerHour int
	// HintWait is how long an owner has to show a change that a hint
	// (webhook, forge feed) told of before the full node asks the
	// upstream itself (default 3 minutes).
	HintWait time.Duration
	// MoveConcurrency is how many repositories the full node copies from
	// other full nodes at once (peer.go; default 2).
	MoveConcurrency int
	// API configures the public API (token, webhook secrets, outgoing
	// hooks).
	API api.Config
	// Serve bounds the public git serving.
	Serve gitserve.Limits
	// IdleConnTimeout bounds how long the public HTTP server keeps a
	// keep-alive connection with no request on it (0: no bound), and
	// MaxConnsPerClient the connections one client address holds open
	// (gitserve.ConnLimit; 0: no cap).
	IdleConnTimeout   time.Duration
	MaxConnsPerClient int
	// Alerts configures the alerts (alerts.go).
	Alerts AlertConfig
	// ServeCache bounds the pack cache (MaxBytes 0: none).
	ServeCache gitserve.CacheConfig
}
