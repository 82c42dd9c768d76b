package monitor

import (
	"encoding/json"
	"fmt"
	"testing"
)

func BenchmarkBatchDecode(b *testing.B) {
	g := Group{T: 1700000000000}
	for i := range 5000 {
		g.Points = append(g.Points, Point{Name: "lightpath_interface_receive_bytes_total", Labels: L("if", fmt.Sprintf("eth%d", i%250), "card", fmt.Sprintf("c%d", i/1000)), V: float64(i) * 1234.5})
	}
	data, _ := json.Marshal(Batch{Node: "n001", Groups: []Group{g}})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var out Batch
		if err := json.Unmarshal(data, &out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/5000, "ns/point")
}
