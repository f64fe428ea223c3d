package main

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// firsts counts, round by round, which size ran first in order (the sizes
// a round's calls were made at, in the order they were made).
func firsts(t *testing.T, order []int, sizes int) map[int]int {
	t.Helper()
	require.Zero(t, len(order)%sizes, "every round runs every size: %v", order)
	first := map[int]int{}
	for r := 0; r < len(order); r += sizes {
		first[order[r]]++
	}
	return first
}

// TestScaleCostAlternatesWhichSizeRunsFirst: the rounds of a scale cost
// start with each size in turn. With the 100k calls always first, the
// large size always ran in their aftermath: a download of 64 KiB read
// 1.15× on average over four such runs and 0.87× over four with the order
// reversed, on the same two tables.
func TestScaleCostAlternatesWhichSizeRunsFirst(t *testing.T) {
	fs := []*scaleFixture{{t: &scaleTarget{total: 100_000}}, {t: &scaleTarget{total: 10_000_000}}}
	var made []int
	op := scaleOp{name: "a call", calls: 3, call: func(f *scaleFixture, _ int) error {
		made = append(made, f.t.total)
		return nil
	}}
	_, err := scaleCost(fs, op)
	require.NoError(t, err)
	made = made[2*20:] // past the warm-up
	require.Len(t, made, 2*scaleRounds*op.calls)
	var order []int // the size of each batch of op.calls calls
	for b := 0; b < len(made); b += op.calls {
		require.Equal(t, made[b:b+1], slices.Compact(slices.Clone(made[b:b+op.calls])), "a batch's calls are at one size")
		order = append(order, made[b])
	}
	first := firsts(t, order, 2)
	require.Equal(t, map[int]int{100_000: (scaleRounds + 1) / 2, 10_000_000: scaleRounds / 2}, first)
}

// TestScaleSweepsAlternateWhichSizeRunsFirst: each pass of a sweep's
// batches starts with the next size.
func TestScaleSweepsAlternateWhichSizeRunsFirst(t *testing.T) {
	small, large := &service.Service{}, &service.Service{}
	sizes := map[*service.Service]int{small: 100_000, large: 10_000_000}
	var order []int
	saved := scaleSweeps
	t.Cleanup(func() { scaleSweeps = saved })
	scaleSweeps = slices.Clone(saved[:1]) // a copy: the fake run must not outlive the test
	scaleSweeps[0].run = func(_ context.Context, s *service.Service) (int, error) {
		order = append(order, sizes[s])
		return scaleSweepBatch, nil
	}
	fs := []*scaleFixture{{t: &scaleTarget{total: 100_000, svc: small}}, {t: &scaleTarget{total: 10_000_000, svc: large}}}
	require.NoError(t, scaleSweepCosts(context.Background(), fs, 10_000_000, &report{}))
	passes := scaleSweepRows / scaleSweepBatch
	require.Len(t, order, 2*passes)
	require.Equal(t, map[int]int{100_000: passes / 2, 10_000_000: passes / 2}, firsts(t, order, 2))
}

// TestRoundOrderStartsEachLoadInTurn: over n rounds each of n loads runs
// first once, and every round runs every load once.
func TestRoundOrderStartsEachLoadInTurn(t *testing.T) {
	for n := 1; n <= 4; n++ {
		first := map[int]int{}
		for i := range n {
			order := roundOrder(i, n)
			require.ElementsMatch(t, order, roundOrder(0, n))
			first[order[0]]++
		}
		require.Len(t, first, n)
	}
}
