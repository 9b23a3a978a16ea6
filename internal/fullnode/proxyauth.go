package fullnode

import (
	"crypto/subtle"
	"net/http"
)

// proxySecretHeader carries the full node's per-process secret on every
// request to its loopback proxy into the tunnels, so that other users of
// the machine cannot reach partial nodes through it.
const proxySecretHeader = "X-Gitfleet-Proxy-Secret"

// requireProxySecret answers 403 to a request without the secret, and
// strips the header from the others before they go on to a partial node.
func requireProxySecret(secret string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(proxySecretHeader)
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(secret)) != 1 {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		r.Header.Del(proxySecretHeader)
		next.ServeHTTP(w, r)
	})
}

// proxyEnv gives git the proxy's secret through its environment (never
// its command line, which other users of the machine can read).
func (f *Node) proxyEnv() []string {
	return []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.extraHeader",
		"GIT_CONFIG_VALUE_0=" + proxySecretHeader + ": " + f.proxySecret}
}
