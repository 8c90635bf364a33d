package sweep

import (
	"io"

	"github.com/stormguard/stormguard/sim/scenario"
	"github.com/stormguard/stormguard/sweep/plan"
)

// A sweep's plan and results are package plan's, which does not import
// the simulator; sweep re-exports them so that its callers need one
// import. A reader of sweeps that never runs one (a report) imports plan.

// The plan (see plan.Options, plan.Plan).
type (
	Options      = plan.Options
	OptionError  = plan.OptionError
	Plan         = plan.Plan
	RunPlan      = plan.RunPlan
	RampPlan     = plan.RampPlan
	PhasePlan    = plan.PhasePlan
	CapacityPlan = plan.CapacityPlan
	LatestPlan   = plan.LatestPlan
	ComparePlan  = plan.ComparePlan
)

// The results (see plan.Result).
type (
	Result         = plan.Result
	RunResult      = plan.RunResult
	Ramp           = plan.Ramp
	Step           = plan.Step
	Phase          = plan.Phase
	Column         = plan.Column
	Probe          = plan.Probe
	CapacitySearch = plan.CapacitySearch
	LatestSearch   = plan.LatestSearch
	SeedRun        = plan.SeedRun
	Comparison     = plan.Comparison
	CompareRow     = plan.CompareRow
)

// A shard's part (see plan.Partial).
type (
	Shard        = plan.Shard
	Partial      = plan.Partial
	RampPart     = plan.RampPart
	ColumnPart   = plan.ColumnPart
	CapacityPart = plan.CapacityPart
	LatestPart   = plan.LatestPart
	ComparePart  = plan.ComparePart
)

// What a phase search grows in the trigger (Options.Vary).
const (
	VaryDuration = plan.VaryDuration
	VaryFactor   = plan.VaryFactor
	VaryAdd      = plan.VaryAdd
	VaryKeys     = plan.VaryKeys
)

// Limits and thresholds (see plan).
const (
	MaxSteps           = plan.MaxSteps
	MaxSizes           = plan.MaxSizes
	MaxDuration        = plan.MaxDuration
	CollapseBelow      = plan.CollapseBelow
	RecoveredAbove     = plan.RecoveredAbove
	DefaultCapacityMax = plan.DefaultCapacityMax
	MaxCapacityFactor  = plan.MaxCapacityFactor
	MaxCompareSeeds    = plan.MaxCompareSeeds
	MaxShards          = plan.MaxShards
	MaxPartialSize     = plan.MaxPartialSize
	PartialFormat      = plan.PartialFormat
)

// NewPlan resolves the sweep of every run of f with the options o (see
// plan.New).
func NewPlan(f scenario.File, o Options) (Plan, error) { return plan.New(f, o) }

// PhaseVaries returns, for each run of f, what its phase search grows
// with the options o (see plan.PhaseVaries).
func PhaseVaries(f scenario.File, o Options) []string { return plan.PhaseVaries(f, o) }

// ParseShard reads "I/N" (see plan.ParseShard).
func ParseShard(s string) (Shard, error) { return plan.ParseShard(s) }

// ReadPartial decodes and checks one Partial (see plan.ReadPartial).
func ReadPartial(r io.Reader) (Partial, error) { return plan.ReadPartial(r) }

// Merge puts together the partials of every shard of one plan (see
// plan.Merge).
func Merge(parts ...Partial) (Result, error) { return plan.Merge(parts...) }
