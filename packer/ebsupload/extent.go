package ebsupload

// extent is a byte range [off, end) of a file that holds data.
type extent struct{ off, end int64 }

// overlaps reports whether [off, end) touches any extent. extents are
// sorted and disjoint; the list is short (a handful for our images), so a
// linear scan is fine.
func overlaps(extents []extent, off, end int64) bool {
	for _, e := range extents {
		if e.off < end && off < e.end {
			return true
		}
		if e.off >= end {
			return false
		}
	}
	return false
}
