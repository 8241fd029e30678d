package parser

import (
	pg_query "github.com/pganalyze/pg_query_go/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// WalkAST calls visit on n and every node below it in pre-order,
// descending into a node's children only when visit returns true. visit
// may replace a node's content in place (n.Node = ...); WalkAST then walks
// the replacement's children only if visit returned true.
func WalkAST(n *pg_query.Node, visit func(*pg_query.Node) bool) {
	if n == nil || n.Node == nil {
		return
	}
	if !visit(n) {
		return
	}
	walkMsg(n.ProtoReflect(), visit)
}

var nodeFullName = (&pg_query.Node{}).ProtoReflect().Descriptor().FullName()

func walkMsg(m protoreflect.Message, visit func(*pg_query.Node) bool) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.Kind() != protoreflect.MessageKind || !m.Has(fd) {
			continue
		}
		one := func(v protoreflect.Message) {
			if v.Descriptor().FullName() == nodeFullName {
				if n, ok := v.Interface().(*pg_query.Node); ok {
					WalkAST(n, visit)
					return
				}
			}
			walkMsg(v, visit)
		}
		if fd.IsList() {
			l := m.Get(fd).List()
			for j := 0; j < l.Len(); j++ {
				one(l.Get(j).Message())
			}
		} else if !fd.IsMap() {
			one(m.Get(fd).Message())
		}
	}
}
