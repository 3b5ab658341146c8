package fakeaws

// Eventual consistency. The EC2 API is eventually consistent (EC2 API
// Reference, "Eventual consistency in the Amazon EC2 API"): a describe
// of a resource just created may answer that it does not exist
// (InvalidAMIID.NotFound, InvalidSnapshot.NotFound, a launch template
// version not found), and AWS asks callers to retry with back-off. Auto
// Scaling and Parameter Store behave alike. The fake models it with
// Server.NotFoundAfterCreate: every resource an API call creates — an AMI
// (RegisterImage, CopyImage), a snapshot (StartSnapshot), a launch
// template version (CreateLaunchTemplateVersion), an instance refresh
// (StartInstanceRefresh) — is answered as unknown by the first K calls
// that name it by id: DescribeImages and DescribeSnapshots with ids
// (InvalidAMIID.NotFound, InvalidSnapshot.NotFound),
// DescribeLaunchTemplateVersions and ModifyLaunchTemplate naming the
// version by number (InvalidLaunchTemplateId.VersionNotFound),
// DescribeInstanceRefreshes naming the refresh (left out of the list, as
// Auto Scaling does for an id it does not know). CreateTags counts apart
// (its own K misses per AMI or snapshot): the EC2 reference names tagging a
// resource just created as a case of eventual consistency, and a tag call
// comes after the describes have seen the resource. A describe by filter
// only (no id) is unaffected. Resources a test adds directly (AddImage,
// AddLaunchTemplate) are old: they are always seen.

// created marks a resource the API just created: its next
// NotFoundAfterCreate lookups by id miss. s.mu must be held.
func (s *Server) created(key string) {
	if s.NotFoundAfterCreate > 0 {
		s.young[key] = s.NotFoundAfterCreate
		s.young["CreateTags/"+key] = s.NotFoundAfterCreate
	}
}

// unseen says whether this lookup of key still misses, and counts it.
// s.mu must be held.
func (s *Server) unseen(key string) bool {
	if s.young[key] <= 0 {
		return false
	}
	s.young[key]--
	s.notFoundAnswers++
	return true
}

// NotFoundAnswers counts the lookups answered "not found" because the
// resource was just created.
func (s *Server) NotFoundAnswers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notFoundAnswers
}
