package report

// Phase is one span of the boot on the kernel's clock (CLOCK_BOOTTIME, in
// milliseconds since the kernel started): where the time to ready went.
type Phase struct {
	Name  string  `json:"name"`
	Start float64 `json:"start_ms"`
	// End is -1 while the phase lasts (a background step still running
	// when the report was printed).
	End float64 `json:"end_ms"`
	// Background marks a step that runs beside the boot: it is not on the
	// way to ready, and its phase may overlap the ones after it.
	Background bool `json:"background,omitempty"`
}

// Names of the phases that are not a step's ("step " + the step's name).
const (
	PhaseKernel = "kernel"        // kernel start to the init's first instruction
	PhaseInit   = "init"          // the init's start to its first step
	PhaseExec   = "workload-exec" // the workload's start requested to its process running
	PhaseReady  = "ready"         // the workload's process running to its first accept
)

// StepPhase is the name of the phase of the step named name.
func StepPhase(name string) string { return "step " + name }
