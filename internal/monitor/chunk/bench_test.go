package chunk

import (
	"math"
	"math/rand/v2"
	"testing"
)

func benchSeries() []sample {
	rng := rand.New(rand.NewPCG(7, 8))
	u := 0.5
	return jittered(rng, 1080, 50, func(int) float64 {
		u = math.Min(0.999, math.Max(0.1, u+rng.NormFloat64()*0.002))
		return math.Round(u*1000) / 1000
	})
}

func BenchmarkAppend(b *testing.B) {
	ss := benchSeries()
	b.ReportAllocs()
	for b.Loop() {
		c := NewChunk()
		for _, s := range ss {
			_ = c.Append(s.t, s.v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ss)), "ns/sample")
}

func BenchmarkIterate(b *testing.B) {
	c := NewChunk()
	for _, s := range benchSeries() {
		_ = c.Append(s.t, s.v)
	}
	b.ReportAllocs()
	for b.Loop() {
		it := c.Iterator()
		for it.Next() {
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.Len()), "ns/sample")
}
