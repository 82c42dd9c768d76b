package service

// DivideRates is divideRates, for the table test.
var DivideRates = divideRates
