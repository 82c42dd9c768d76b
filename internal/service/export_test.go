package service

// DivideRates is divideRates, for the table test.
var DivideRates = divideRates

// FlowSpec and SourceAddr are flowSpec and sourceAddr, for the table test.
var (
	FlowSpec   = flowSpec
	SourceAddr = sourceAddr
)
