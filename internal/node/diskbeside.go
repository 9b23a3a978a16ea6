package node

// diskBeside is what a node keeps on its disk besides its served mirrors,
// counted with them against --disk-quota (and so by the full-disk policy
// and gitfleet_full_disk_used_bytes): the data of removed repositories
// kept for --retention (mirror.RetiredSize, walked again only after a
// removal, a re-addition or a sweep) and what its role keeps (the files
// of the full node's pack cache: their own count, no walk). It is read
// with the mirrors' measure, at most every 10 s. Without a quota the file
// system's usage counts them already.
func (n *Node) diskBeside() uint64 {
	size := n.mirror.RetiredSize() + n.role.DiskBeside()
	return uint64(max(size, 0))
}
