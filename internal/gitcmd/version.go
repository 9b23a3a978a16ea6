package gitcmd

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Version is a git version, e.g. {2, 39, 5}.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is major.minor or newer.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || v.Major == major && v.Minor >= minor
}

// Version asks the installed git for its version.
func (r *Runner) Version(ctx context.Context) (Version, error) {
	out, err := r.Output(ctx, Cmd{Name: "version"})
	if err != nil {
		return Version{}, err
	}
	return ParseVersion(string(out))
}

// ParseVersion reads the output of "git version" ("git version 2.39.5",
// "git version 2.43.0.windows.1", "git version 2.39.3 (Apple Git-146)").
func ParseVersion(s string) (Version, error) {
	f := strings.Fields(s)
	if len(f) < 3 || f[0] != "git" || f[1] != "version" {
		return Version{}, fmt.Errorf("gitcmd: cannot read the git version in %q", s)
	}
	parts := strings.Split(f[2], ".")
	var n [3]int
	for i := 0; i < len(n) && i < len(parts); i++ {
		v, err := strconv.Atoi(parts[i])
		if err != nil {
			if i < 2 {
				return Version{}, fmt.Errorf("gitcmd: cannot read the git version in %q", s)
			}
			break
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

// TreeDepthVersion is the first git that knows core.maxTreeDepth.
var TreeDepthVersion = Version{2, 43, 0}
