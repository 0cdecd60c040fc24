package set

import (
	"context"
	"net/http"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/api"
)

func requestID(ctx context.Context) string           { return api.RequestID(ctx) }
func addField(ctx context.Context, f zap.Field)      { api.AddField(ctx, f) }
func (s *Server) logged(h http.Handler) http.Handler { return api.Logged(s.log, h) }
