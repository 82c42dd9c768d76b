package fast

import (
	"fmt"
	"math"
	"strconv"
)

// Params are FAST's parameters.
type Params struct {
	// Alpha is the number of packets each flow keeps queued in the path
	// at equilibrium (ANCHORS: 15-200).
	Alpha uint32
	// Gamma is the step towards the target window per round, in
	// 1/GammaScale: 512 is one half.
	Gamma uint32
}

// MarshalJSON writes gamma as the fraction users give: {"alpha":100,"gamma":0.5}.
func (p Params) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`{"alpha":%d,"gamma":%s}`, p.Alpha, GammaString(p.Gamma))), nil
}

// DefaultParams: 100 packets queued (11.6 ms at 100 Mbit/s, 1.2 ms at
// 1 Gbit/s with 1448-byte segments), half-way steps.
var DefaultParams = Params{Alpha: 100, Gamma: GammaScale / 2}

// MaxAlpha bounds alpha: more packets than this queued per flow is a
// buffer filler, not FAST.
const MaxAlpha = 100000

// Check says what is wrong with p, if anything.
func (p Params) Check() error {
	if p.Alpha < 1 || p.Alpha > MaxAlpha {
		return fmt.Errorf("alpha %d: want 1 to %d packets", p.Alpha, MaxAlpha)
	}
	if p.Gamma < 1 || p.Gamma > GammaScale {
		return fmt.Errorf("gamma %s: want a fraction in (0, 1]", GammaString(p.Gamma))
	}
	return nil
}

// ParseGamma reads gamma as a fraction in (0, 1] ("0.5") into 1/GammaScale.
func ParseGamma(s string) (uint32, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f <= 0 || f > 1 {
		return 0, fmt.Errorf("gamma %q: want a fraction in (0, 1], e.g. 0.5", s)
	}
	g := uint32(math.Round(f * GammaScale))
	return max(g, 1), nil
}

// GammaString prints gamma (1/GammaScale) as a fraction.
func GammaString(g uint32) string {
	return strconv.FormatFloat(float64(g)/GammaScale, 'g', 4, 64)
}

func (p Params) String() string {
	return fmt.Sprintf("alpha=%d gamma=%s", p.Alpha, GammaString(p.Gamma))
}
