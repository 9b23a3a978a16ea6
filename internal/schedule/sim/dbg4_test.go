package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/gitfleet/gitfleet/internal/schedule"
)

func TestDbg5(t *testing.T) {
	tr := Generate(KindWorkHours, 1000, 60, 1)
	schedule.DebugLate = [25]int{}
	schedule.DebugHour = [24]int{}
	res, _ := Run(tr, Options{Policies: []string{"adaptive"}, Budget: 500.0 / 24, Start: epoch.Add(30 * 24 * time.Hour)})
	fmt.Println(res)
	fmt.Println("late hours:", schedule.DebugLate)
	fmt.Println("by hour:", schedule.DebugHour)
}
