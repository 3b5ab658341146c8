package image

// CheckConfig validates an init configuration and a kernel command line
// the way Build does before it spends time on builds (the init's own
// parser, then the command line's hotpath.* words, then the rules the
// image adds), so that a front end such as the Packer builder can refuse
// a bad setting when the template is validated. It returns the effective
// configuration. An empty text means DefaultInitConfig.
func CheckConfig(text []byte, cmdline string) (map[string]string, error) {
	if len(text) == 0 {
		text = []byte(DefaultInitConfig)
	}
	return checkConfig(text, cmdline)
}
