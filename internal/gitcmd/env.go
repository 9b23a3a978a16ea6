package gitcmd

import (
	"fmt"
	"strconv"
	"strings"
)

// A caller's Env is allow-listed, as its flags are: git reads dozens of
// variables that change what it runs or where it connects (GIT_EXEC_PATH,
// GIT_SSH, GIT_CONFIG_PARAMETERS, GIT_DIR, GIT_SSL_NO_VERIFY,
// LD_PRELOAD for its children...), and a variable the runner does not set
// itself would reach git as the caller wrote it. Only these may be set:
//   - GIT_PROTOCOL, the protocol a client asked upload-pack for;
//   - GIT_CONFIG_COUNT with its GIT_CONFIG_KEY_<n> and GIT_CONFIG_VALUE_<n>,
//     whose keys may only be an http extra header (http.extraHeader, or
//     http.<url>.extraHeader): credentials and the proxy's secret travel
//     there, never on a command line;
//   - GIT_HTTP_LOW_SPEED_LIMIT and GIT_HTTP_LOW_SPEED_TIME, curl's
//     low-speed cut.

// envAllowed are the variables a caller may set without a check of their value.
var envAllowed = map[string]bool{
	"GIT_PROTOCOL":             true,
	"GIT_HTTP_LOW_SPEED_LIMIT": true,
	"GIT_HTTP_LOW_SPEED_TIME":  true,
}

// checkEnv refuses a caller's environment that sets anything but the
// variables above, or a configuration key other than an extra header.
func checkEnv(name string, env []string) error {
	count := -1
	keys := map[int]bool{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("gitcmd: git %s: environment entry %q is not NAME=value", name, kv)
		}
		switch {
		case envAllowed[k]:
		case k == "GIT_CONFIG_COUNT":
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("gitcmd: git %s: GIT_CONFIG_COUNT=%q is not a count", name, v)
			}
			count = n
		case strings.HasPrefix(k, "GIT_CONFIG_VALUE_"):
			if _, err := strconv.Atoi(strings.TrimPrefix(k, "GIT_CONFIG_VALUE_")); err != nil {
				return fmt.Errorf("gitcmd: git %s: environment variable %s is not one a caller may set", name, k)
			}
		case strings.HasPrefix(k, "GIT_CONFIG_KEY_"):
			i, err := strconv.Atoi(strings.TrimPrefix(k, "GIT_CONFIG_KEY_"))
			if err != nil {
				return fmt.Errorf("gitcmd: git %s: environment variable %s is not one a caller may set", name, k)
			}
			if !extraHeaderKey(v) {
				return fmt.Errorf("gitcmd: git %s: configuration key %q in the environment: only http.extraHeader may be set there", name, v)
			}
			keys[i] = true
		default:
			return fmt.Errorf("gitcmd: git %s: environment variable %s is not one a caller may set (see env.go in package gitcmd)", name, k)
		}
	}
	// git reads GIT_CONFIG_KEY_0 .. COUNT-1: each must be one checked above.
	for i := 0; i < count; i++ {
		if !keys[i] {
			return fmt.Errorf("gitcmd: git %s: GIT_CONFIG_COUNT=%d but GIT_CONFIG_KEY_%d is not set", name, count, i)
		}
	}
	return nil
}

// extraHeaderKey tells whether key is http.extraHeader or
// http.<url>.extraHeader (git compares the key's sections without case).
func extraHeaderKey(key string) bool {
	lower := strings.ToLower(key)
	if !strings.HasPrefix(lower, "http.") || !strings.HasSuffix(lower, ".extraheader") {
		return false
	}
	return len(lower) == len("http.extraheader") || len(lower) > len("http..extraheader")
}
