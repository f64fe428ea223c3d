package service

// PlanCachingDB exposes the service's plan-caching DB to the tests of
// package service_test.
type PlanCachingDB = planCachingDB

// NewPlanCachingDB is newPlanCachingDB.
func NewPlanCachingDB(db DB) *PlanCachingDB { return newPlanCachingDB(db) }

// Connections is how many connections hold plans.
func (d *planCachingDB) Connections() int {
	n := 0
	d.conns.Range(func(any, any) bool { n++; return true })
	return n
}
