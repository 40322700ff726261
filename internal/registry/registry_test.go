package registry

import (
	"strings"
	"sync"
	"testing"
)

type item struct{ name, v string }

func TestList(t *testing.T) {
	l := New("thing", func(i item) string { return i.name }, item{"a", "1"})
	if err := l.Add(item{"b", "2"}, item{"c", "3"}); err != nil {
		t.Fatal(err)
	}
	err := l.Add(item{"d", "4"}, item{"a", "again"}, item{"e", "5"})
	if err == nil || !strings.Contains(err.Error(), `register thing "a": the name is taken`) {
		t.Fatalf("a taken name: got %v", err)
	}
	var names []string
	for _, it := range l.All() {
		names = append(names, it.name)
	}
	if got := strings.Join(names, ","); got != "a,b,c,d" {
		t.Fatalf("order: got %s, want a,b,c,d (the items before the taken name stay, the ones after it do not)", got)
	}
	if it, ok := l.Get("a"); !ok || it.v != "1" {
		t.Fatalf("Get(a) = %v, %v; want the first a", it, ok)
	}
	if _, ok := l.Get("zz"); ok {
		t.Fatal("Get of an unknown name found something")
	}
	all := l.All()
	all[0].v = "changed"
	if it, _ := l.Get("a"); it.v != "1" {
		t.Fatal("All returned the list itself, not a copy")
	}
}

func TestListConcurrentAdd(t *testing.T) {
	l := New[item]("thing", func(i item) string { return i.name })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- l.Add(item{name: "same"})
		}()
	}
	wg.Wait()
	close(errs)
	var ok int
	for err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok != 1 || len(l.All()) != 1 {
		t.Fatalf("8 concurrent adds of one name: %d accepted, %d listed; want 1 and 1", ok, len(l.All()))
	}
}
