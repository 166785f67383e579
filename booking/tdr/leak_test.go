package tdr_test

import (
	"testing"

	"go.uber.org/goleak"

	"tatkal/booking/lab/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.LeakOptions()...) }
