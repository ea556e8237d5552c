// Command atari_state writes context-store's golden files for atari's `.atari/state.json`.
//
// atari saves its run state with json.MarshalIndent(state, "", "  ") of its State struct.
// The structs below carry the same Go types and JSON tags as atari's State (version 1, and
// version 2, the current one) and its history entries, so encoding/json writes exactly what
// atari writes for the same values. The program builds the states the tests make the service
// write, step by step as atari's event handling takes them (and as the service documents it),
// and writes each one.
//
// It is not part of `make test`; run ../atari_state.sh, which says where the files go.
//
//	go run . <tests/formats/golden>
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// historyEntry has the tags of atari's BeadHistory.
type historyEntry struct {
	ID            string    `json:"id"`
	Status        string    `json:"status"`
	Attempts      int       `json:"attempts"`
	LastAttempt   time.Time `json:"last_attempt"`
	LastError     string    `json:"last_error,omitempty"`
	LastSessionID string    `json:"last_session_id,omitempty"`
}

// stateV1 has the tags of atari's State at version 1 (before the stall fields).
type stateV1 struct {
	Version             int                      `json:"version"`
	Status              string                   `json:"status"`
	Iteration           int                      `json:"iteration"`
	CurrentBead         string                   `json:"current_bead,omitempty"`
	History             map[string]*historyEntry `json:"history"`
	TotalCost           float64                  `json:"total_cost"`
	TotalTurns          int                      `json:"total_turns"`
	UpdatedAt           time.Time                `json:"updated_at"`
	ActiveTopLevel      string                   `json:"active_top_level,omitempty"`
	ActiveTopLevelTitle string                   `json:"active_top_level_title,omitempty"`
}

// state has the tags of atari's State at version 2. StalledAt is a time.Time tagged
// omitempty: encoding/json never treats a struct as empty, so it is always written, as
// 0001-01-01T00:00:00Z when nothing is stalled. That is the point of these files.
type state struct {
	Version             int                      `json:"version"`
	Status              string                   `json:"status"`
	Iteration           int                      `json:"iteration"`
	CurrentBead         string                   `json:"current_bead,omitempty"`
	History             map[string]*historyEntry `json:"history"`
	TotalCost           float64                  `json:"total_cost"`
	TotalTurns          int                      `json:"total_turns"`
	UpdatedAt           time.Time                `json:"updated_at"`
	ActiveTopLevel      string                   `json:"active_top_level,omitempty"`
	ActiveTopLevelTitle string                   `json:"active_top_level_title,omitempty"`
	StalledBeadID       string                   `json:"stalled_bead_id,omitempty"`
	StalledBeadTitle    string                   `json:"stalled_bead_title,omitempty"`
	StallReason         string                   `json:"stall_reason,omitempty"`
	StalledAt           time.Time                `json:"stalled_at,omitempty"`
	StallType           string                   `json:"stall_type,omitempty"`
	CreatedBeads        []string                 `json:"created_beads,omitempty"`
}

// serviceNow stands for the `updated_at` the service writes when it saves a state ("now"):
// the tests put the service's own value in its place before comparing.
var serviceNow = at("2026-01-01T00:00:00Z")

func at(text string) time.Time {
	moment, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		panic(err)
	}
	return moment
}

func write(path string, value any) {
	data, err := json.MarshalIndent(value, "", "  ")
	if err != nil {
		panic(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		panic(err)
	}
	// atari writes the encoder's bytes as they are: no newline at the end.
	if err := os.WriteFile(path, data, 0o644); err != nil {
		panic(err)
	}
	fmt.Println(path)
}

func read(path string, into any) {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(data, into); err != nil {
		panic(err)
	}
}

// copied returns a deep copy, so that each step's file keeps the state of that step.
func (s state) copied() state {
	history := make(map[string]*historyEntry, len(s.History))
	for id, entry := range s.History {
		dup := *entry
		history[id] = &dup
	}
	s.History = history
	s.CreatedBeads = append([]string(nil), s.CreatedBeads...)
	if len(s.CreatedBeads) == 0 {
		s.CreatedBeads = nil
	}
	return s
}

// fresh is the state atari starts from when it has none or sets a file aside.
func fresh() state {
	return state{Version: 2, History: map[string]*historyEntry{}, UpdatedAt: serviceNow}
}

// migrated is atari's load of a version 1 file: read into the version 2 struct, and only the
// version number changes (the stall fields keep their zero values).
func migrated(path string) state {
	var loaded state
	read(path, &loaded)
	loaded.Version = 2
	return loaded
}

func (s state) started(bead string, attempts int, when time.Time) state {
	s = s.copied()
	s.Iteration++
	s.CurrentBead = bead
	entry := s.History[bead]
	if entry == nil {
		entry = &historyEntry{ID: bead}
		s.History[bead] = entry
	}
	entry.Status = "working"
	entry.Attempts = attempts
	entry.LastAttempt = when
	s.UpdatedAt = serviceNow
	return s
}

func (s state) ended(bead, outcome, lastError, session string, cost float64, turns int) state {
	s = s.copied()
	s.CurrentBead = ""
	s.TotalCost += cost
	s.TotalTurns += turns
	entry := s.History[bead]
	entry.Status = outcome
	if outcome == "failed" {
		entry.LastError = lastError
	}
	if session != "" {
		entry.LastSessionID = session
	}
	s.UpdatedAt = serviceNow
	return s
}

func (s state) stalled(status, bead, title, reason string, when time.Time, kind string, created []string) state {
	s = s.copied()
	s.Status = status
	s.StalledBeadID = bead
	s.StalledBeadTitle = title
	s.StallReason = reason
	s.StalledAt = when
	s.StallType = kind
	s.CreatedBeads = created
	s.UpdatedAt = serviceNow
	return s
}

func (s state) stallCleared(status string) state {
	s = s.copied()
	s.Status = status
	s.StalledBeadID = ""
	s.StalledBeadTitle = ""
	s.StallReason = ""
	s.StalledAt = time.Time{}
	s.StallType = ""
	s.CreatedBeads = nil
	s.UpdatedAt = serviceNow
	return s
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run . <tests/formats/golden>")
		os.Exit(2)
	}
	golden := os.Args[1]
	atari := filepath.Join(golden, "atari")
	seed := filepath.Join(golden, "atari-state-seed-example.json")

	// The seed's version 1 example, and a version 2 document with every field, escapes and a
	// float: what Go writes for them (the codec's unit tests).
	var seedV1 stateV1
	read(seed, &seedV1)
	write(seed, seedV1)
	var full state
	read(filepath.Join(golden, "atari-state-v2-input.json"), &full)
	write(filepath.Join(golden, "atari-state-v2.json"), full)

	// A file atari sets aside: the fresh state it continues with.
	write(filepath.Join(atari, "reset.json"), fresh())

	// The seed loaded (version 1 to 2), then one iteration and a stall on it, step by step.
	// The values are the ones tests/runs/test_runs.py sends.
	seedMigrated := migrated(seed)
	write(filepath.Join(atari, "seed-migrated.json"), seedMigrated)
	seedStarted := seedMigrated.started("bd-002", 4, at("2024-01-15T12:00:00Z"))
	write(filepath.Join(atari, "seed-started.json"), seedStarted)
	seedEnded := seedStarted.ended(
		"bd-002", "failed", "lint <failed> & more\u2028", "sess-\U0001F600", 0.1, 7)
	write(filepath.Join(atari, "seed-ended.json"), seedEnded)
	seedStalled := seedEnded.stalled(
		"stalled", "bd-002", "Flaky <test> & 中文 \U0001F600", "max failures reached",
		at("2024-01-15T12:30:00.25+01:00"), "review", []string{"bd-200", "bd-201"})
	write(filepath.Join(atari, "seed-stalled.json"), seedStalled)
	write(filepath.Join(atari, "seed-stall-cleared.json"), seedStalled.stallCleared("running"))

	// A run with no state: two attempts at one bead; 0.1 + 0.2 is not 0.3 in float64.
	first := fresh().started("bd-7", 1, at("2024-02-01T09:00:00Z"))
	first = first.ended("bd-7", "failed", "", "sess-1", 0.1, 3)
	second := first.started("bd-7", 2, at("2024-02-01T09:30:00.123456789Z"))
	write(filepath.Join(atari, "fresh-two-iterations.json"),
		second.ended("bd-7", "completed", "", "sess-2", 0.2, 4))

	// Totals in each of encoding/json's float forms.
	for name, cost := range map[string]float64{
		"tiny":      1e-7,
		"huge":      1e21,
		"subnormal": 5e-324,
		"plain":     123456.789,
	} {
		totals := fresh()
		totals.TotalCost = cost
		totals.UpdatedAt = at("2024-03-01T00:00:00Z")
		write(filepath.Join(atari, "total-cost-"+name+".json"), totals)
	}

	writeWorkspace(filepath.Join(golden, "workspace", ".atari"))
}

// writeWorkspace writes the two run states of the workspace corpus as atari leaves them on a
// developer's machine: times from time.Now() in the local zone with nanoseconds, costs summed
// from sessions.
func writeWorkspace(dir string) {
	pacific := time.FixedZone("PST", -8*60*60)
	moment := func(text string) time.Time { return at(text).In(pacific) }

	running := state{Version: 2, Status: "working", History: map[string]*historyEntry{}}
	for _, step := range []struct {
		bead, outcome, lastError, session string
		cost                              float64
		turns                             int
		start                             string
	}{
		{"ctx-4k2", "completed", "", "9f0c2a1e-5b7d-4e11-9a3c-1f2e3d4c5b6a", 0.4213045, 23, "2026-11-20T21:58:04.118733021Z"},
		{"ctx-9qd", "failed", "exit status 1: go test ./... failed", "b1d2e3f4-0a1b-4c2d-8e3f-a0b1c2d3e4f5", 0.9120433, 41, "2026-11-20T22:06:51.402117690Z"},
		{"ctx-9qd", "completed", "", "c4e5f6a7-1b2c-4d3e-9f4a-b5c6d7e8f9a0", 0.6052871, 30, "2026-11-20T22:19:13.775020418Z"},
		{"ctx-a1m", "failed", "claude session exited: context deadline exceeded", "d7f8a9b0-2c3d-4e5f-8a9b-c0d1e2f3a4b5", 1.0377902000000001, 57, "2026-11-20T22:31:40.009381245Z"},
	} {
		entry := running.History[step.bead]
		attempts := 1
		if entry != nil {
			attempts = entry.Attempts + 1
		}
		running = running.started(step.bead, attempts, moment(step.start))
		running = running.ended(step.bead, step.outcome, step.lastError, step.session, step.cost, step.turns)
	}
	running = running.started("ctx-a1m", 2, moment("2026-11-20T22:47:02.563904117Z"))
	running.ActiveTopLevel = "ctx-epic-3"
	running.ActiveTopLevelTitle = "Sync <workspace> & pull"
	running.UpdatedAt = moment("2026-11-20T22:47:07.601155302Z")
	write(filepath.Join(dir, "state.json"), running)

	review := state{Version: 2, Status: "running", History: map[string]*historyEntry{}}
	review = review.started("rv-12", 1, at("2026-11-21T03:10:44.250911738Z"))
	review = review.ended("rv-12", "completed", "", "e0a1b2c3-d4e5-4f6a-8b7c-9d0e1f2a3b4c", 2.25, 88)
	review = review.stalled("stalled", "rv-12", "Résumé export: “quotes”", "session created beads that need review",
		at("2026-11-21T03:29:58.014462311Z"), "review", []string{"rv-13", "rv-14"})
	review.UpdatedAt = at("2026-11-21T03:30:03.120844559Z")
	write(filepath.Join(dir, "runs", "review", "state.json"), review)
}
