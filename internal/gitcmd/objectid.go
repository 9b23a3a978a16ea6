package gitcmd

// objectID reports whether s is a full object ID: 40 (SHA-1) or 64
// (SHA-256) lower-case hex digits, which no option or pathspec can be.
func objectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
