/* kgr viz: the live knowledge-graph page.
 *
 * The view is a pure function of (q, focus, expand): the page asks /api/graph for it
 * every 2 s with If-None-Match and applies only differences, so nodes keep their places.
 * Everything from the database is put in the page as text (textContent), never as HTML.
 */
(function () {
  "use strict";

  var POLL_MS = 2000;
  var state = {
    q: null,            // a search the view starts from
    focus: [],          // entity ids the view starts from
    expand: [],         // entity ids whose neighbourhoods were grown by clicks
    etag: null,
    paused: false,
    inFlight: false,
    labels: true,
    hiddenTypes: new Set(),
    hiddenRels: new Set(),
    selected: null,
    types: {},
    stable: false,
    updates: 0,         // how many times new data was applied (tests wait on it)
    lastGraph: null,
  };

  var nodes = new vis.DataSet();
  var edges = new vis.DataSet();
  var nodeView = new vis.DataView(nodes, { filter: function (n) { return !state.hiddenTypes.has(n.type); } });
  var edgeView = new vis.DataView(edges, { filter: function (e) { return !state.hiddenRels.has(e.rel); } });

  var container = document.getElementById("graph");
  var network = new vis.Network(container, { nodes: nodeView, edges: edgeView }, {
    autoResize: true,
    nodes: {
      shape: "dot",
      scaling: { min: 8, max: 30, label: { enabled: false } },
      font: { size: 14, face: "system-ui, Helvetica, Arial, sans-serif", color: "#1d2330", strokeWidth: 3, strokeColor: "#fbfcfd" },
      borderWidth: 1,
    },
    edges: {
      arrows: { to: { enabled: true, scaleFactor: 0.5 } },
      color: { color: "#9aa3b5", highlight: "#2456a6", hover: "#2456a6" },
      font: { size: 10, color: "#5b6478", strokeWidth: 3, strokeColor: "#fbfcfd", align: "middle" },
      smooth: { type: "continuous" },
      width: 1,
    },
    physics: {
      solver: "forceAtlas2Based",
      forceAtlas2Based: { gravitationalConstant: -60, springLength: 110, springConstant: 0.06, avoidOverlap: 0.4 },
      stabilization: { iterations: 300, updateInterval: 50 },
      minVelocity: 1,
    },
    interaction: { hover: true, dragNodes: true, dragView: true, zoomView: true, tooltipDelay: 150 },
  });
  // A dense neighbourhood can jitter for ever: the layout gets SETTLE_MS, then it stops.
  var SETTLE_MS = 6000;
  var settleTimer = null;
  var fitWhenLaidOut = false;
  network.on("startStabilizing", function () {
    state.stable = false;
    clearTimeout(settleTimer);
    settleTimer = setTimeout(function () { network.stopSimulation(); state.stable = true; }, SETTLE_MS);
  });
  network.on("stabilized", function () { clearTimeout(settleTimer); state.stable = true; });
  network.on("stabilizationIterationsDone", function () {
    if (fitWhenLaidOut) { fitWhenLaidOut = false; network.fit({ animation: false }); }
  });

  // -- helpers -------------------------------------------------------------------------

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "class") node.className = attrs[k];
      else if (k === "style") node.setAttribute("style", attrs[k]);
      else if (k.slice(0, 2) === "on") node.addEventListener(k.slice(2), attrs[k]);
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) {
      if (c === null || c === undefined) return;
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  function swatch(color) { return el("span", { class: "swatch", style: "background:" + color }); }

  function darker(hex) {
    var n = parseInt(hex.slice(1), 16);
    var f = function (v) { return Math.max(0, Math.round(v * 0.7)); };
    return "rgb(" + f(n >> 16) + "," + f((n >> 8) & 255) + "," + f(n & 255) + ")";
  }

  function setStatus(text, cls) {
    var s = document.getElementById("status");
    s.textContent = text;
    s.className = cls || "";
  }

  function graphUrl() {
    var p = new URLSearchParams();
    if (state.q) p.set("q", state.q);
    if (state.focus.length) p.set("focus", state.focus.join(","));
    if (state.expand.length) p.set("expand", state.expand.join(","));
    return "/api/graph?" + p.toString();
  }

  function getJSON(url) {
    return fetch(url, { cache: "no-store" }).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
        return body;
      });
    });
  }

  // -- the graph -----------------------------------------------------------------------

  function refresh() {
    if (state.inFlight) return Promise.resolve();
    state.inFlight = true;
    var headers = state.etag ? { "If-None-Match": state.etag } : {};
    var url = graphUrl();
    return fetch(url, { cache: "no-store", headers: headers }).then(function (r) {
      if (r.status === 304) return null;
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
        state.etag = r.headers.get("ETag");
        return body;
      });
    }).then(function (data) {
      if (data && url === graphUrl()) apply(data);
      showStatus();
      if (state.selected !== null) showDetails(state.selected, true);  // 304 unless it changed
    }).catch(function (err) {
      setStatus("error: " + err.message, "error");
    }).finally(function () { state.inFlight = false; });
  }

  function apply(data) {
    state.lastGraph = data;
    state.types = data.types;
    var nodeItems = data.nodes.map(function (n) {
      var color = data.types[n.type] || "#999999";
      var more = n.hidden > 0 ? "\n" + n.hidden + " more link" + (n.hidden > 1 ? "s" : "") + ": click to expand" : "";
      return {
        id: n.id, label: n.name, type: n.type, value: 1 + n.degree,
        title: n.name + " (" + n.type + ")" + (n.aliases.length ? "\naka " + n.aliases.join(", ") : "") + more,
        color: { background: color, border: darker(color), highlight: { background: color, border: "#1d2330" },
                 hover: { background: color, border: "#1d2330" } },
        borderWidth: n.seed && (state.q || state.focus.length) ? 3 : 1,  // the overview is all seeds
        shapeProperties: { borderDashes: n.hidden > 0 && !n.expanded ? [4, 3] : false },
      };
    });
    var edgeItems = data.edges.map(function (e) {
      return { id: e.id, from: e.from, to: e.to, rel: e.rel, label: e.rel,
               title: e.rel + " (confidence " + e.confidence + (e.origin === "manual" ? ", manual" : "") + ")",
               dashes: e.origin !== "manual" && e.confidence < 0.5 };
    });
    placeNewNodesNearTheirNeighbours(nodeItems, data.edges);
    var keepNodes = new Set(nodeItems.map(function (n) { return n.id; }));
    var keepEdges = new Set(edgeItems.map(function (e) { return e.id; }));
    edges.remove(edges.getIds().filter(function (id) { return !keepEdges.has(id); }));
    nodes.remove(nodes.getIds().filter(function (id) { return !keepNodes.has(id); }));
    nodes.update(nodeItems);
    edges.update(edgeItems);
    applyLabels();
    buildFilters(data);
    state.updates += 1;
    document.body.dataset.version = data.version;
    document.body.dataset.updates = String(state.updates);
  }

  // A node that arrives with a poll starts next to a node it links to, not at a random place.
  function placeNewNodesNearTheirNeighbours(nodeItems, edgeList) {
    var positions = network.getPositions();
    nodeItems.forEach(function (n) {
      if (positions[n.id]) return;
      var edge = edgeList.find(function (e) {
        return (e.from === n.id && positions[e.to]) || (e.to === n.id && positions[e.from]);
      });
      if (!edge) return;
      var p = positions[edge.from === n.id ? edge.to : edge.from];
      n.x = p.x + (Math.random() - 0.5) * 120;
      n.y = p.y + (Math.random() - 0.5) * 120;
    });
  }

  function showStatus() {
    var g = state.lastGraph;
    if (!g) return;
    var t = new Date().toLocaleTimeString();
    var text = g.nodes.length + " of " + g.totals.entities + " entities · " + g.edges.length + " of " +
      g.totals.relations + " relations" + (g.truncated ? " (truncated)" : "") + " · ";
    if (state.paused) setStatus(text + "paused", "paused");
    else setStatus(text + "live, checked " + t);
  }

  function countBy(items, key) {
    var out = {};
    items.forEach(function (x) { out[x[key]] = (out[x[key]] || 0) + 1; });
    return out;
  }

  function buildFilters(data) {
    var legend = document.getElementById("legend");
    var typeCounts = countBy(data.nodes, "type");
    legend.replaceChildren.apply(legend, Object.keys(data.types).map(function (t) {
      var box = el("input", { type: "checkbox", "data-type": t });
      box.checked = !state.hiddenTypes.has(t);
      box.addEventListener("change", function () {
        if (box.checked) state.hiddenTypes.delete(t); else state.hiddenTypes.add(t);
        nodeView.refresh();
      });
      return el("li", {}, [el("label", {}, [box, swatch(data.types[t]), el("span", { text: t }),
                                             el("span", { class: "count", text: String(typeCounts[t] || 0) })])]);
    }));
    var rels = document.getElementById("rel-filters");
    var relCounts = countBy(data.edges, "rel");
    var names = Object.keys(relCounts).sort();
    if (!names.length) { rels.replaceChildren(el("li", { class: "muted", text: "no relations in view" })); return; }
    rels.replaceChildren.apply(rels, names.map(function (r) {
      var box = el("input", { type: "checkbox", "data-rel": r });
      box.checked = !state.hiddenRels.has(r);
      box.addEventListener("change", function () {
        if (box.checked) state.hiddenRels.delete(r); else state.hiddenRels.add(r);
        edgeView.refresh();
      });
      return el("li", {}, [el("label", {}, [box, el("span", { class: "rel-name", text: r }),
                                             el("span", { class: "count", text: String(relCounts[r]) })])]);
    }));
  }

  function applyLabels() {
    network.setOptions({ nodes: { font: { size: state.labels ? 14 : 0 } }, edges: { font: { size: state.labels ? 10 : 0 } } });
  }

  function setView(view) {
    state.q = view.q || null;
    state.focus = view.focus || [];
    state.expand = view.expand || [];
    state.etag = null;
    nodes.clear();
    edges.clear();
    return refresh().then(function () {
      fitWhenLaidOut = true;
      network.stabilize(200);
    });
  }

  function expand(id) {
    if (state.expand.indexOf(id) === -1 && state.focus.indexOf(id) === -1) {
      state.expand = state.expand.concat([id]);
      refresh();
    }
  }

  // -- details -------------------------------------------------------------------------

  function entityLink(id, name) {
    return el("span", { class: "entity-link", text: name, onclick: function () { select(id); } });
  }

  function select(id) {
    state.selected = id;
    network.selectNodes(nodes.get(id) ? [id] : []);
    showDetails(id, false);
    expand(id);
  }

  function showDetails(id, quiet) {
    var headers = quiet && state.detailsFor === id && state.detailsEtag ? { "If-None-Match": state.detailsEtag } : {};
    return fetch("/api/entity/" + id, { cache: "no-store", headers: headers }).then(function (r) {
      if (r.status === 304) return null;
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body.error || ("HTTP " + r.status));
        state.detailsEtag = r.headers.get("ETag");
        state.detailsFor = id;
        return body;
      });
    }).then(function (e) {
      if (!e || state.selected !== id) return;
      var body = document.getElementById("details-body");
      var parts = [
        el("h2", { text: e.name }),
        el("div", {}, [el("span", { class: "type-badge", style: "background:" + e.color, text: e.type }),
                       el("span", { class: "key", text: e.key })]),
      ];
      if (e.aliases.length) parts.push(el("h3", { text: "Aliases" }), el("p", { class: "aliases", text: e.aliases.join(", ") }));
      if (e.definition) parts.push(el("h3", { text: "Definition" }), el("p", { class: "definition", text: e.definition }));
      if (e.observations.length) {
        parts.push(el("h3", { text: "Observations" }),
                   el("ul", { class: "observations" }, e.observations.map(function (o) { return el("li", { text: o.content }); })));
      }
      parts.push(el("h3", { text: "Relations (" + e.relations.length + ")" }));
      parts.push(e.relations.length ? el("ul", { class: "relations" }, e.relations.map(function (r) {
        var ev = r.evidence.length ? el("span", { class: "evidence", text: r.evidence[0].path + ": " + (r.evidence[0].sentence || "") }) : null;
        return el("li", {}, [
          r.src === e.id ? el("span", { text: r.src_name }) : entityLink(r.src, r.src_name), " ",
          el("span", { class: "rel-name", text: "—" + r.rel + "→" }), " ",
          r.dst === e.id ? el("span", { text: r.dst_name }) : entityLink(r.dst, r.dst_name), ev]);
      })) : el("p", { class: "muted", text: "none" }));
      parts.push(el("h3", { text: "Sources (" + e.sources.length + ")" }));
      parts.push(e.sources.length ? el("ul", { class: "sources" }, e.sources.map(function (s) {
        var t = s.snippet.text, a = s.snippet.mark[0], b = s.snippet.mark[1];
        return el("li", {}, [
          el("span", { class: "source-path", text: s.path }),
          el("span", { class: "muted", text: (s.section ? " · " + s.section : "") + " · " + s.mentions + " mention" + (s.mentions > 1 ? "s" : "") }),
          el("p", { class: "snippet" }, [t.slice(0, a), el("mark", { text: t.slice(a, b) }), t.slice(b)]),
        ]);
      })) : el("p", { class: "muted", text: "none" }));
      parts.push(el("p", {}, [el("button", { type: "button", text: "Focus on this entity",
                                             onclick: function () { setView({ focus: [e.id] }); } })]));
      body.replaceChildren.apply(body, parts);
      document.getElementById("details").hidden = false;
      document.getElementById("details").dataset.entity = String(e.id);
      network.redraw();
    }).catch(function (err) {
      if (!quiet) setStatus("error: " + err.message, "error");
    });
  }

  network.on("click", function (params) {
    if (params.nodes.length) select(params.nodes[0]);
  });

  document.getElementById("close-details").addEventListener("click", function () {
    state.selected = null;
    document.getElementById("details").hidden = true;
    network.unselectAll();
  });

  // -- search, controls ------------------------------------------------------------------

  var search = document.getElementById("search");
  var results = document.getElementById("search-results");
  var searchTimer = null;

  search.addEventListener("input", function () {
    clearTimeout(searchTimer);
    var q = search.value.trim();
    if (!q) { results.hidden = true; return; }
    searchTimer = setTimeout(function () {
      getJSON("/api/search?q=" + encodeURIComponent(q) + "&limit=12").then(function (r) {
        if (search.value.trim() !== q) return;
        results.replaceChildren.apply(results, r.hits.length ? r.hits.map(function (h) {
          return el("li", { "data-id": String(h.id), onmousedown: function (ev) {
            ev.preventDefault();
            results.hidden = true;
            setView({ focus: [h.id] }).then(function () { select(h.id); });
          } }, [swatch(h.color), el("span", { text: h.name }), el("span", { class: "muted", text: h.type })]);
        }) : [el("li", { class: "empty", text: "no entity matches" })]);
        results.hidden = false;
      });
    }, 200);
  });
  search.addEventListener("blur", function () { setTimeout(function () { results.hidden = true; }, 150); });
  document.getElementById("search-form").addEventListener("submit", function (ev) {
    ev.preventDefault();
    results.hidden = true;
    var q = search.value.trim();
    setView(q ? { q: q } : {});
  });
  document.getElementById("overview").addEventListener("click", function () {
    search.value = "";
    setView({});
  });
  document.getElementById("labels").addEventListener("change", function (ev) {
    state.labels = ev.target.checked;
    applyLabels();
  });
  var pause = document.getElementById("pause");
  pause.addEventListener("click", function () {
    state.paused = !state.paused;
    pause.textContent = state.paused ? "Resume" : "Pause";
    pause.setAttribute("aria-pressed", String(state.paused));
    showStatus();
    if (!state.paused) refresh();
  });

  setInterval(function () { if (!state.paused) refresh(); }, POLL_MS);

  // For the browser tests and the curious: the page's state and the network.
  window.kgrViz = { network: network, nodes: nodes, edges: edges, state: state, refresh: refresh, select: select, setView: setView };

  setView({});
})();
