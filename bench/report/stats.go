package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// percentile is the nearest-rank percentile: the smallest sample with at
// least p% of the samples at or below it (with fewer than 100 samples, p99
// is the maximum).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(rank, len(s)-1))]
}

func stat(xs []float64, name string) float64 {
	switch name {
	case "p50":
		return percentile(xs, 50)
	case "p99":
		return percentile(xs, 99)
	case "min":
		return slices.Min(xs)
	case "max":
		return slices.Max(xs)
	case "mean":
		sum := 0.0
		for _, x := range xs {
			sum += x
		}
		return sum / float64(len(xs))
	}
	return math.NaN()
}

// decimals is how a unit's values are printed by default.
func decimals(unit string) int {
	switch unit {
	case "deliveries", "groups":
		return 0
	case "% of a core":
		return 2
	case "MB":
		return 2
	}
	return 1
}

// format prints v in its unit's precision.
func format(v float64, unit string) string {
	return strconv.FormatFloat(v, 'f', decimals(unit), 64)
}

// formatAgainst prints v so that its relation to limit reads true: a value
// over a maximum never prints as the maximum or below (and one under a
// minimum never as the minimum or above), however close it is.
func formatAgainst(v, limit float64, over bool, unit string) string {
	for d := decimals(unit); d <= 6; d++ {
		s := strconv.FormatFloat(v, 'f', d, 64)
		p, _ := strconv.ParseFloat(s, 64)
		if (over && p > limit) || (!over && p < limit) {
			return s
		}
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// verdict judges the samples against every target.
func verdict(s series) (text string, missed bool) {
	if len(s.Targets) == 0 {
		return "", false
	}
	out := ""
	for i, t := range s.Targets {
		if i > 0 {
			out += "; "
		}
		v := stat(s.Samples, t.Stat)
		switch {
		case t.AtLeast && v < t.Min:
			out += fmt.Sprintf("**MISSED**: %s %s %s < %s", t.Stat, formatAgainst(v, t.Min, false, s.Unit), unitSuffix(s.Unit), limit(t.Min, s.Unit))
			missed = true
		case t.AtLeast:
			out += fmt.Sprintf("met: %s ≥ %s", t.Stat, limit(t.Min, s.Unit))
		case v > t.Max:
			out += fmt.Sprintf("**MISSED**: %s %s %s > %s", t.Stat, formatAgainst(v, t.Max, true, s.Unit), unitSuffix(s.Unit), limit(t.Max, s.Unit))
			missed = true
		default:
			out += fmt.Sprintf("met: %s ≤ %s", t.Stat, limit(t.Max, s.Unit))
		}
	}
	return out, missed
}

func targetText(s series) string {
	out := ""
	for i, t := range s.Targets {
		if i > 0 {
			out += ", "
		}
		if t.AtLeast {
			out += fmt.Sprintf("%s ≥ %s", t.Stat, limit(t.Min, s.Unit))
		} else {
			out += fmt.Sprintf("%s ≤ %s", t.Stat, limit(t.Max, s.Unit))
		}
	}
	return out
}

// limit prints a target as the issue states it, with its unit.
func limit(v float64, unit string) string {
	return strconv.FormatFloat(v, 'f', -1, 64) + " " + unitSuffix(unit)
}

func unitSuffix(u string) string {
	if u == "% of a core" {
		return "%"
	}
	return u
}
