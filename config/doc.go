// Package config loads the configuration of `edge-agent run` and
// `edge-agent check-config`: a YAML file and the run flags, which override
// it.
//
// Each setting is declared once, in one table (settings.go): its key in the
// file, its flag, its help and where its value goes. The file is parsed by
// yaml.v3 into its node tree and walked against the table, so that a key
// that is not a setting is refused and every error names the key, and for
// a value of the file its line ("config FILE: line 6: heartbeat: ..."); a
// mistake found later, by agent.Config.Validate, names the flag or the line
// that set the key. The file's format, the flags and their meaning are the
// operating contract (README.md).
package config
