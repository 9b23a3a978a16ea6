// Package humanize writes figures for people: the command line and the
// console show sizes the same way.
package humanize

import "fmt"

// Bytes writes n in binary units: "512 B", "1.5 KiB", "3.2 GiB".
func Bytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
