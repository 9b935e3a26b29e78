/*
** bfsvtab: breadth-first search over an edge table, as an SQLite virtual table.
**
** Written for kgr (a local-first GraphRAG toolchain); it is a loadable extension
** with no dependency other than SQLite itself.
**
**   SELECT id, parent, distance, path
**   FROM bfsvtab
**   WHERE tablename = 'graph_edges'   -- required: the edge table or view
**     AND root = 42                   -- required: the start node (an integer)
**     AND fromcolumn = 'src'          -- default 'src'
**     AND tocolumn = 'dst'            -- default 'dst'
**     AND max_depth = 3               -- default -1 (NULL or -1: no limit)
**     AND direction = 'both'          -- 'out' (default), 'in' or 'both'
**     AND rels = 'uses,part_of';      -- default '': every relation type
**
** Every node reachable from root within max_depth hops comes out once, at its
** minimum distance, in (distance, id) order. parent is the smallest id among the
** nodes one hop closer that have an edge to it (NULL for the root), and path is
** the chain of parents from the root to the node, as comma-separated ids. The
** root is always returned, even when it has no edge or is in no row of the table.
** A NULL id in the edge table is skipped; any other non-integer id is an error.
** rels filters on a column named "rel" of the edge table; it is split on commas
** and each part is compared exactly.
**
** Edges are read one level at a time, with one statement per level and direction:
**   SELECT f.id, e."to" FROM bfsvtab_frontier(?1) AS f CROSS JOIN "table" AS e
**   ON e."from" = f.id [AND e."rel" IN (...)]
** where bfsvtab_frontier is a companion table-valued function that yields the ids
** of the level (handed over with sqlite3_bind_pointer, so SQL cannot feed it).
** That is one index seek per frontier node when "from" is indexed, inside one
** statement. The statements are kept prepared between queries. When SQLite
** answers a level's lookup by scanning the table or building an automatic index
** (no usable index), bfsvtab reads the edges once with a single SELECT instead
** and walks an in-memory sorted edge list. Visited ids are kept in a hash set.
**
** bfsvtab_version() returns the version of this extension.
**
** Build: gcc -O2 -fPIC -shared -Ivendor/bfsvtab vendor/bfsvtab/bfsvtab.c -o bfsvtab.so
*/
#include "sqlite3ext.h"
SQLITE_EXTENSION_INIT1

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define BFSVTAB_VERSION "1.0.0"

/* Column numbers, in the order of the CREATE TABLE below. */
#define BFS_COL_ID         0
#define BFS_COL_PARENT     1
#define BFS_COL_DISTANCE   2
#define BFS_COL_PATH       3
#define BFS_COL_TABLENAME  4  /* first hidden (input) column */
#define BFS_COL_FROMCOLUMN 5
#define BFS_COL_TOCOLUMN   6
#define BFS_COL_ROOT       7
#define BFS_COL_MAXDEPTH   8
#define BFS_COL_DIRECTION  9
#define BFS_COL_RELS       10
#define BFS_NINPUT         7

#define BFS_INPUT(col) (1u << ((col) - BFS_COL_TABLENAME))
#define BFS_REQUIRED   (BFS_INPUT(BFS_COL_TABLENAME) | BFS_INPUT(BFS_COL_ROOT))
#define BFS_MISSING    0x100u  /* idxNum flag: a required constraint is absent */

#define BFS_OUT  1
#define BFS_IN   2
#define BFS_BOTH 3

typedef sqlite3_int64 i64;

/* One node of the result. */
typedef struct BfsNode {
  i64 id;
  i64 parent;     /* meaningless for the root (distance 0) */
  i64 distance;
} BfsNode;

/* One edge a->b of the in-memory edge list (used when lookups would scan). */
typedef struct BfsEdge {
  i64 a;
  i64 b;
} BfsEdge;

/*
** Lookup statements are kept between queries (a prepare costs about as much as a
** few lookups), and finalized in xDisconnect. A search takes a statement out of
** the cache and gives it back when done, so a nested search (an edge view that
** itself queries bfsvtab) never shares one. A statement that refers to bfsvtab
** itself (through such a view) is never kept: it would hold a reference to this
** table, whose xDisconnect would then never run, and sqlite3_close() would fail
** on the unfinalized statement. Such a statement is recognized by the planning
** of bfsvtab (xBestIndex, counted in nPlan) while it is prepared or run:
** SQLite plans every table a statement refers to, at each (re)prepare.
*/
#define BFS_NCACHE 4

typedef struct BfsVtab {
  sqlite3_vtab base;
  sqlite3 *db;
  sqlite3_stmt *aCache[BFS_NCACHE];  /* reset statements, oldest first */
  int nCache;
  sqlite3_uint64 nPlan;              /* calls of bfsBestIndex */
} BfsVtab;

typedef struct BfsCursor {
  sqlite3_vtab_cursor base;
  /* The result, sorted by (distance, id). */
  BfsNode *aNode;
  i64 nNode;
  i64 nNodeAlloc;
  i64 *aLevel;      /* aLevel[d] = index of the first node at distance d */
  i64 nLevel;       /* aLevel has nLevel+1 entries; the last one is nNode */
  i64 iRow;
  /* The effective inputs, returned by the hidden columns. */
  char *zTable;
  char *zFrom;
  char *zTo;
  char *zDirection;
  char *zRels;
  i64 iRoot;
  i64 iMaxDepth;    /* -1: no limit */
} BfsCursor;

/* Nodes [lo, hi) of pCur->aNode: a level of the search (pCur->aNode may move as it grows). */
typedef struct BfsFrontier {
  BfsCursor *pCur;
  i64 lo, hi;
} BfsFrontier;

/* State of one search, freed before xFilter returns. */
typedef struct BfsSearch {
  sqlite3 *db;
  BfsCursor *pCur;
  BfsVtab *pVtab;
  int direction;
  /* Open-addressing hash set of the visited ids: a slot holds node index + 1. */
  i64 *aSlot;
  i64 nSlot;        /* a power of two, 0 before the first insert */
  /* The level being expanded, as bfsvtab_frontier(?1) gives it to the lookups. */
  BfsFrontier frontier;
  /* Level lookups ([0] follows from->to, [1] to->from). */
  sqlite3_stmt *aLookup[2];
  /* In-memory edge list sorted by a, used once bUseList is set. */
  int bUseList;
  BfsEdge *aEdge;
  i64 nEdge;
  i64 nEdgeAlloc;
  /* The rels filter: nRel parts of zRels (not NUL-terminated). */
  const char **azRel;
  int *anRel;
  int nRel;
  char *zErr;       /* error message, from sqlite3_mprintf() */
} BfsSearch;

/* ------------------------------------------------------------------------- */

static int bfsConnect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                      sqlite3_vtab **ppVtab, char **pzErr){
  BfsVtab *p;
  int rc;
  (void)pAux; (void)argc; (void)argv; (void)pzErr;
  rc = sqlite3_declare_vtab(db,
      "CREATE TABLE x(id INTEGER, parent INTEGER, distance INTEGER, path TEXT,"
      " tablename HIDDEN, fromcolumn HIDDEN, tocolumn HIDDEN, root HIDDEN,"
      " max_depth HIDDEN, direction HIDDEN, rels HIDDEN)");
  if( rc!=SQLITE_OK ) return rc;
  p = sqlite3_malloc(sizeof(*p));
  if( p==0 ) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  p->db = db;
  *ppVtab = &p->base;
  return SQLITE_OK;
}

static int bfsDisconnectPlain(sqlite3_vtab *pVtab){
  sqlite3_free(pVtab);
  return SQLITE_OK;
}

static int bfsDisconnect(sqlite3_vtab *pVtab){
  BfsVtab *p = (BfsVtab*)pVtab;
  int i;
  for(i=0; i<p->nCache; i++) sqlite3_finalize(p->aCache[i]);
  sqlite3_free(pVtab);
  return SQLITE_OK;
}

static int bfsOpen(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCursor){
  BfsCursor *pCur;
  (void)pVtab;
  pCur = sqlite3_malloc(sizeof(*pCur));
  if( pCur==0 ) return SQLITE_NOMEM;
  memset(pCur, 0, sizeof(*pCur));
  *ppCursor = &pCur->base;
  return SQLITE_OK;
}

static void bfsCursorReset(BfsCursor *pCur){
  sqlite3_free(pCur->aNode);
  sqlite3_free(pCur->aLevel);
  sqlite3_free(pCur->zTable);
  sqlite3_free(pCur->zFrom);
  sqlite3_free(pCur->zTo);
  sqlite3_free(pCur->zDirection);
  sqlite3_free(pCur->zRels);
  memset(&pCur->aNode, 0, sizeof(*pCur) - offsetof(BfsCursor, aNode));
}

static int bfsClose(sqlite3_vtab_cursor *cur){
  BfsCursor *pCur = (BfsCursor*)cur;
  bfsCursorReset(pCur);
  sqlite3_free(pCur);
  return SQLITE_OK;
}

static int bfsNext(sqlite3_vtab_cursor *cur){
  ((BfsCursor*)cur)->iRow++;
  return SQLITE_OK;
}

static int bfsEof(sqlite3_vtab_cursor *cur){
  BfsCursor *pCur = (BfsCursor*)cur;
  return pCur->iRow>=pCur->nNode;
}

static int bfsRowid(sqlite3_vtab_cursor *cur, sqlite_int64 *pRowid){
  *pRowid = ((BfsCursor*)cur)->iRow + 1;
  return SQLITE_OK;
}

/* Index of the node with this id at distance d (its level is sorted by id), or -1. */
static i64 bfsFindAtLevel(BfsCursor *pCur, i64 d, i64 id){
  i64 lo, hi;
  if( d<0 || d>=pCur->nLevel ) return -1;
  lo = pCur->aLevel[d];
  hi = pCur->aLevel[d+1];
  while( lo<hi ){
    i64 mid = lo + (hi-lo)/2;
    if( pCur->aNode[mid].id<id ) lo = mid+1; else hi = mid;
  }
  return (lo<pCur->aLevel[d+1] && pCur->aNode[lo].id==id) ? lo : -1;
}

/* The comma-separated ids from the root to node i, following the parents. */
static void bfsPath(sqlite3_context *ctx, BfsCursor *pCur, i64 i){
  i64 n = pCur->aNode[i].distance + 1;
  i64 *aChain;
  i64 k;
  sqlite3_str *pStr;
  aChain = sqlite3_malloc64(sizeof(i64)*(sqlite3_uint64)n);
  if( aChain==0 ){ sqlite3_result_error_nomem(ctx); return; }
  for(k=n-1; k>=0; k--){
    aChain[k] = pCur->aNode[i].id;
    if( k>0 ){
      i = bfsFindAtLevel(pCur, pCur->aNode[i].distance-1, pCur->aNode[i].parent);
      if( i<0 ){  /* cannot happen: every parent is one level closer */
        sqlite3_free(aChain);
        sqlite3_result_error(ctx, "bfsvtab: broken parent chain", -1);
        return;
      }
    }
  }
  pStr = sqlite3_str_new(0);
  for(k=0; k<n; k++){
    sqlite3_str_appendf(pStr, k ? ",%lld" : "%lld", aChain[k]);
  }
  sqlite3_free(aChain);
  if( sqlite3_str_errcode(pStr)!=SQLITE_OK ){
    int rc = sqlite3_str_errcode(pStr);
    sqlite3_free(sqlite3_str_finish(pStr));
    if( rc==SQLITE_NOMEM ) sqlite3_result_error_nomem(ctx);
    else sqlite3_result_error_toobig(ctx);
    return;
  }
  {
    int nByte = sqlite3_str_length(pStr);
    sqlite3_result_text(ctx, sqlite3_str_finish(pStr), nByte, sqlite3_free);
  }
}

static int bfsColumn(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int iCol){
  BfsCursor *pCur = (BfsCursor*)cur;
  BfsNode *pNode = &pCur->aNode[pCur->iRow];
  switch( iCol ){
    case BFS_COL_ID:       sqlite3_result_int64(ctx, pNode->id); break;
    case BFS_COL_PARENT:
      if( pNode->distance>0 ) sqlite3_result_int64(ctx, pNode->parent);
      break;  /* NULL for the root */
    case BFS_COL_DISTANCE: sqlite3_result_int64(ctx, pNode->distance); break;
    case BFS_COL_PATH:     bfsPath(ctx, pCur, pCur->iRow); break;
    case BFS_COL_TABLENAME:
      sqlite3_result_text(ctx, pCur->zTable, -1, SQLITE_TRANSIENT); break;
    case BFS_COL_FROMCOLUMN:
      sqlite3_result_text(ctx, pCur->zFrom, -1, SQLITE_TRANSIENT); break;
    case BFS_COL_TOCOLUMN:
      sqlite3_result_text(ctx, pCur->zTo, -1, SQLITE_TRANSIENT); break;
    case BFS_COL_ROOT:     sqlite3_result_int64(ctx, pCur->iRoot); break;
    case BFS_COL_MAXDEPTH: sqlite3_result_int64(ctx, pCur->iMaxDepth); break;
    case BFS_COL_DIRECTION:
      sqlite3_result_text(ctx, pCur->zDirection, -1, SQLITE_TRANSIENT); break;
    case BFS_COL_RELS:
      sqlite3_result_text(ctx, pCur->zRels, -1, SQLITE_TRANSIENT); break;
  }
  return SQLITE_OK;
}

/*
** Each hidden column is an input, taken from an equality constraint. A plan in
** which such a constraint is present but not usable (its value comes from a
** table later in the join) is refused with SQLITE_CONSTRAINT, so that SQLite
** picks a join order that provides it. When tablename or root has no equality
** constraint at all, no plan can provide it: the plan is accepted at a
** prohibitive cost and xFilter reports which input is missing, which is a
** clearer message than "no query solution".
*/
static int bfsBestIndex(sqlite3_vtab *pVtab, sqlite3_index_info *p){
  int aUse[BFS_NINPUT];
  unsigned seen = 0, usable = 0;
  int i, k, nArg = 0;
  int bIn = 0;
  ((BfsVtab*)pVtab)->nPlan++;
  for(k=0; k<BFS_NINPUT; k++) aUse[k] = -1;
  for(i=0; i<p->nConstraint; i++){
    const struct sqlite3_index_constraint *c = &p->aConstraint[i];
    if( c->iColumn<BFS_COL_TABLENAME || c->op!=SQLITE_INDEX_CONSTRAINT_EQ ) continue;
    k = c->iColumn - BFS_COL_TABLENAME;
    seen |= 1u<<k;
    if( !c->usable ) continue;
    usable |= 1u<<k;
    if( aUse[k]<0 ) aUse[k] = i;
  }
  if( (seen & ~usable)!=0 ) return SQLITE_CONSTRAINT;
  for(k=0; k<BFS_NINPUT; k++){
    if( aUse[k]<0 ) continue;
    p->aConstraintUsage[aUse[k]].argvIndex = ++nArg;
    p->aConstraintUsage[aUse[k]].omit = 1;
    /* sqlite3_vtab_in() exists from 3.38.0: an IN constraint means one xFilter
    ** call per value, whose results are not in one (distance, id) order;
    ** sqlite3_vtab_in() only knows about the first 32 constraints. */
    if( sqlite3_libversion_number()<3038000 || aUse[k]>=32 || sqlite3_vtab_in(p, aUse[k], -1) ) bIn = 1;
  }
  p->idxNum = (int)usable;
  if( (usable & BFS_REQUIRED)!=BFS_REQUIRED ){
    p->idxNum |= BFS_MISSING;
    p->estimatedCost = 1e300;
    p->estimatedRows = 2147483647;
    return SQLITE_OK;
  }
  p->estimatedCost = 1000.0;
  p->estimatedRows = 1000;
  /* Rows come out in (distance, id) order. */
  if( !bIn && p->nOrderBy>=1 && p->nOrderBy<=2
   && p->aOrderBy[0].iColumn==BFS_COL_DISTANCE && !p->aOrderBy[0].desc
   && (p->nOrderBy==1 || (p->aOrderBy[1].iColumn==BFS_COL_ID && !p->aOrderBy[1].desc)) ){
    p->orderByConsumed = 1;
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------------------- */

/*
** Sorts of nodes by id and of edges by source, inlined (introsort: quicksort,
** heapsort past 2*log2(n) levels, insertion sort for short ranges); the C
** library's qsort() costs a comparison call per step and, in glibc, a malloc().
*/
#define BFS_DEFINE_SORT(NAME, T, KEY)                                          \
static void NAME##Sift(T *a, i64 i, i64 n){                                    \
  T x = a[i];                                                                  \
  for(;;){                                                                     \
    i64 c = 2*i + 1;                                                           \
    if( c>=n ) break;                                                          \
    if( c+1<n && a[c+1].KEY>a[c].KEY ) c++;                                    \
    if( a[c].KEY<=x.KEY ) break;                                               \
    a[i] = a[c];                                                               \
    i = c;                                                                     \
  }                                                                            \
  a[i] = x;                                                                    \
}                                                                              \
static void NAME(T *a, i64 n){                                                 \
  int depth = 0;                                                               \
  i64 m;                                                                       \
  for(m=n; m>1; m>>=1) depth += 2;                                             \
  while( n>16 ){                                                               \
    i64 i = -1, j = n, p0 = a[0].KEY, p1 = a[n/2].KEY, p2 = a[n-1].KEY, p;     \
    T t;                                                                       \
    if( depth--==0 ){                                                          \
      for(i=n/2-1; i>=0; i--) NAME##Sift(a, i, n);                             \
      for(i=n-1; i>0; i--){ t = a[0]; a[0] = a[i]; a[i] = t; NAME##Sift(a, 0, i); } \
      return;                                                                  \
    }                                                                          \
    p = p0<p1 ? (p1<p2 ? p1 : (p0<p2 ? p2 : p0)) : (p0<p2 ? p0 : (p1<p2 ? p2 : p1)); \
    for(;;){                                                                   \
      do i++; while( a[i].KEY<p );                                             \
      do j--; while( a[j].KEY>p );                                             \
      if( i>=j ) break;                                                        \
      t = a[i]; a[i] = a[j]; a[j] = t;                                         \
    }                                                                          \
    /* [0, j] <= p <= [j+1, n): sort the smaller side, loop on the larger */   \
    if( j+1<n-j-1 ){ NAME(a, j+1); a += j+1; n -= j+1; }                       \
    else{ NAME(a+j+1, n-j-1); n = j+1; }                                       \
  }                                                                            \
  for(m=1; m<n; m++){                                                          \
    T x = a[m];                                                                \
    i64 k = m;                                                                 \
    for(; k>0 && a[k-1].KEY>x.KEY; k--) a[k] = a[k-1];                         \
    a[k] = x;                                                                  \
  }                                                                            \
}

BFS_DEFINE_SORT(bfsSortNodes, BfsNode, id)
BFS_DEFINE_SORT(bfsSortEdges, BfsEdge, a)

static unsigned long long bfsHash(i64 id){
  unsigned long long x = (unsigned long long)id;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* Index of the visited node with this id, or -1. */
static i64 bfsLookup(BfsSearch *s, i64 id){
  i64 mask, h;
  if( s->nSlot==0 ) return -1;
  mask = s->nSlot-1;
  h = (i64)(bfsHash(id) & (unsigned long long)mask);
  while( s->aSlot[h] ){
    if( s->pCur->aNode[s->aSlot[h]-1].id==id ) return s->aSlot[h]-1;
    h = (h+1) & mask;
  }
  return -1;
}

static void bfsSlotPut(i64 *aSlot, i64 nSlot, i64 id, i64 iNode){
  i64 mask = nSlot-1;
  i64 h = (i64)(bfsHash(id) & (unsigned long long)mask);
  while( aSlot[h] ) h = (h+1) & mask;
  aSlot[h] = iNode+1;
}

/* Append a node and add it to the hash set. */
static int bfsAddNode(BfsSearch *s, i64 id, i64 parent, i64 distance){
  BfsCursor *pCur = s->pCur;
  if( pCur->nNode>=pCur->nNodeAlloc ){
    i64 nNew = pCur->nNodeAlloc ? pCur->nNodeAlloc*2 : 64;
    BfsNode *aNew = sqlite3_realloc64(pCur->aNode, sizeof(BfsNode)*(sqlite3_uint64)nNew);
    if( aNew==0 ) return SQLITE_NOMEM;
    pCur->aNode = aNew;
    pCur->nNodeAlloc = nNew;
  }
  if( (pCur->nNode+1)*2>s->nSlot ){  /* keep the load factor at most 1/2 */
    i64 nNew = s->nSlot ? s->nSlot*2 : 128;
    i64 i;
    i64 *aNew = sqlite3_malloc64(sizeof(i64)*(sqlite3_uint64)nNew);
    if( aNew==0 ) return SQLITE_NOMEM;
    memset(aNew, 0, sizeof(i64)*(size_t)nNew);
    for(i=0; i<pCur->nNode; i++) bfsSlotPut(aNew, nNew, pCur->aNode[i].id, i);
    sqlite3_free(s->aSlot);
    s->aSlot = aNew;
    s->nSlot = nNew;
  }
  pCur->aNode[pCur->nNode].id = id;
  pCur->aNode[pCur->nNode].parent = parent;
  pCur->aNode[pCur->nNode].distance = distance;
  bfsSlotPut(s->aSlot, s->nSlot, id, pCur->nNode);
  pCur->nNode++;
  return SQLITE_OK;
}

/* Node v is reached from u at distance d. */
static int bfsVisit(BfsSearch *s, i64 v, i64 u, i64 d){
  i64 i = bfsLookup(s, v);
  if( i<0 ) return bfsAddNode(s, v, u, d);
  if( s->pCur->aNode[i].distance==d && u<s->pCur->aNode[i].parent ){
    s->pCur->aNode[i].parent = u;
  }
  return SQLITE_OK;
}

/* An id read from the edge table: 1 for an integer, 0 for NULL (skipped), else an error. */
static int bfsReadId(BfsSearch *s, sqlite3_stmt *pStmt, int iCol, const char *zCol, i64 *pId){
  switch( sqlite3_column_type(pStmt, iCol) ){
    case SQLITE_INTEGER:
      *pId = sqlite3_column_int64(pStmt, iCol);
      return 1;
    case SQLITE_NULL:
      return 0;
    default:
      s->zErr = sqlite3_mprintf("bfsvtab: %s.%s holds a non-integer value '%q'",
                                s->pCur->zTable, zCol, (const char*)sqlite3_column_text(pStmt, iCol));
      return -1;
  }
}

/* Append ' AND e."rel" IN (?first, ...)' and bind nothing yet. */
static void bfsAppendRelFilter(sqlite3_str *pStr, int nRel, int iFirst, const char *zWord){
  int i;
  if( nRel==0 ) return;
  sqlite3_str_appendf(pStr, " %s e.\"rel\" IN (", zWord);
  for(i=0; i<nRel; i++) sqlite3_str_appendf(pStr, i ? ",?%d" : "?%d", iFirst+i);
  sqlite3_str_appendall(pStr, ")");
}

static int bfsBindRels(BfsSearch *s, sqlite3_stmt *pStmt, int iFirst){
  int i, rc = SQLITE_OK;
  for(i=0; i<s->nRel && rc==SQLITE_OK; i++){
    rc = sqlite3_bind_text(pStmt, iFirst+i, s->azRel[i], s->anRel[i], SQLITE_TRANSIENT);
  }
  return rc;
}

static int bfsPrepare(BfsSearch *s, sqlite3_str *pStr, sqlite3_stmt **ppStmt){
  char *zSql;
  int rc;
  rc = sqlite3_str_errcode(pStr);
  if( rc!=SQLITE_OK ){
    sqlite3_free(sqlite3_str_finish(pStr));
    if( rc!=SQLITE_NOMEM ) s->zErr = sqlite3_mprintf("bfsvtab: the edge query is too long");
    return rc;
  }
  zSql = sqlite3_str_finish(pStr);
  rc = sqlite3_prepare_v2(s->db, zSql, -1, ppStmt, 0);
  if( rc!=SQLITE_OK && rc!=SQLITE_NOMEM ){
    s->zErr = sqlite3_mprintf("bfsvtab: cannot read edges from \"%w\": %s", s->pCur->zTable, sqlite3_errmsg(s->db));
  }
  sqlite3_free(zSql);
  return rc;
}

/*
** The lookup of the edges of one level: for each frontier node f, an index seek
**   SELECT f.id, e."b" FROM bfsvtab_frontier(?1) AS f CROSS JOIN "table" AS e
**   ON e."a" = f.id [AND e."rel" IN (?2...)]
** (CROSS JOIN keeps the frontier as the outer loop). Columns are qualified with
** the alias so that a misspelt name is an error, not a string literal (SQLite's
** double-quoted-string fallback).
*/
static int bfsPrepareLookup(BfsSearch *s, const char *zA, const char *zB, sqlite3_stmt **ppStmt){
  BfsVtab *pVtab = s->pVtab;
  sqlite3_str *pStr = sqlite3_str_new(s->db);
  int rc, i;
  sqlite3_str_appendf(pStr, "SELECT f.id, e.\"%w\" FROM bfsvtab_frontier(?1) AS f CROSS JOIN \"%w\" AS e"
                            " ON e.\"%w\"=f.id", zB, s->pCur->zTable, zA);
  bfsAppendRelFilter(pStr, s->nRel, 2, "AND");
  *ppStmt = 0;
  if( sqlite3_str_errcode(pStr)==SQLITE_OK ){
    const char *zSql = sqlite3_str_value(pStr);
    for(i=0; i<pVtab->nCache; i++){
      if( strcmp(sqlite3_sql(pVtab->aCache[i]), zSql)==0 ){
        *ppStmt = pVtab->aCache[i];
        pVtab->nCache--;
        memmove(&pVtab->aCache[i], &pVtab->aCache[i+1], sizeof(sqlite3_stmt*)*(size_t)(pVtab->nCache-i));
        break;
      }
    }
  }
  if( *ppStmt ){
    sqlite3_free(sqlite3_str_finish(pStr));
    rc = SQLITE_OK;
  }else{
    rc = bfsPrepare(s, pStr, ppStmt);
  }
  if( rc==SQLITE_OK ) rc = bfsBindRels(s, *ppStmt, 2);
  /* Only the scans of this search count (see bfsExpandLevel). */
  if( rc==SQLITE_OK ){
    sqlite3_stmt_status(*ppStmt, SQLITE_STMTSTATUS_FULLSCAN_STEP, 1);
    sqlite3_stmt_status(*ppStmt, SQLITE_STMTSTATUS_AUTOINDEX, 1);
  }
  return rc;
}

/* Give a lookup statement back to the cache, or finalize it. */
static void bfsReleaseLookup(BfsVtab *pVtab, sqlite3_stmt *pStmt, int bKeep){
  if( pStmt==0 ) return;
  if( !bKeep ){
    sqlite3_finalize(pStmt);
    return;
  }
  sqlite3_reset(pStmt);
  sqlite3_bind_null(pStmt, 1);  /* no pointer to a finished search stays bound */
  if( pVtab->nCache==BFS_NCACHE ){
    sqlite3_finalize(pVtab->aCache[0]);
    pVtab->nCache--;
    memmove(&pVtab->aCache[0], &pVtab->aCache[1], sizeof(sqlite3_stmt*)*(size_t)pVtab->nCache);
  }
  pVtab->aCache[pVtab->nCache++] = pStmt;
}


static int bfsPushEdge(BfsSearch *s, i64 a, i64 b){
  if( s->nEdge>=s->nEdgeAlloc ){
    i64 nNew = s->nEdgeAlloc ? s->nEdgeAlloc*2 : 1024;
    BfsEdge *aNew = sqlite3_realloc64(s->aEdge, sizeof(BfsEdge)*(sqlite3_uint64)nNew);
    if( aNew==0 ) return SQLITE_NOMEM;
    s->aEdge = aNew;
    s->nEdgeAlloc = nNew;
  }
  s->aEdge[s->nEdge].a = a;
  s->aEdge[s->nEdge].b = b;
  s->nEdge++;
  return SQLITE_OK;
}

/* Read every edge once, in the search direction(s), into a list sorted by a. */
static int bfsLoadEdges(BfsSearch *s){
  BfsCursor *pCur = s->pCur;
  sqlite3_str *pStr = sqlite3_str_new(s->db);
  sqlite3_stmt *pStmt = 0;
  int rc;
  sqlite3_str_appendf(pStr, "SELECT e.\"%w\", e.\"%w\" FROM \"%w\" AS e", pCur->zFrom, pCur->zTo, pCur->zTable);
  bfsAppendRelFilter(pStr, s->nRel, 1, "WHERE");
  rc = bfsPrepare(s, pStr, &pStmt);
  if( rc==SQLITE_OK ) rc = bfsBindRels(s, pStmt, 1);
  while( rc==SQLITE_OK && (rc = sqlite3_step(pStmt))==SQLITE_ROW ){
    i64 a, b;
    int ra = bfsReadId(s, pStmt, 0, pCur->zFrom, &a);
    int rb = ra<0 ? 0 : bfsReadId(s, pStmt, 1, pCur->zTo, &b);
    rc = SQLITE_OK;
    if( ra<0 || rb<0 ){ rc = SQLITE_ERROR; break; }
    if( ra==0 || rb==0 ) continue;
    if( s->direction & BFS_OUT ) rc = bfsPushEdge(s, a, b);
    if( rc==SQLITE_OK && (s->direction & BFS_IN) ) rc = bfsPushEdge(s, b, a);
  }
  if( rc==SQLITE_DONE ) rc = SQLITE_OK;
  if( rc!=SQLITE_OK && s->zErr==0 && rc!=SQLITE_NOMEM ){
    s->zErr = sqlite3_mprintf("bfsvtab: %s", sqlite3_errmsg(s->db));
  }
  sqlite3_finalize(pStmt);
  if( rc==SQLITE_OK && s->nEdge>1 ) bfsSortEdges(s->aEdge, s->nEdge);
  return rc;
}

/* Visit the neighbours of u, found in the sorted edge list. */
static int bfsExpandFromList(BfsSearch *s, i64 u, i64 d){
  i64 lo = 0, hi = s->nEdge;
  int rc = SQLITE_OK;
  while( lo<hi ){
    i64 mid = lo + (hi-lo)/2;
    if( s->aEdge[mid].a<u ) lo = mid+1; else hi = mid;
  }
  for(; lo<s->nEdge && s->aEdge[lo].a==u && rc==SQLITE_OK; lo++){
    rc = bfsVisit(s, s->aEdge[lo].b, u, d);
  }
  return rc;
}

/* Visit the neighbours of the frontier nodes through one level lookup. */
static int bfsExpandFromLookup(BfsSearch *s, sqlite3_stmt *pStmt, const char *zCol, i64 d){
  int rc = sqlite3_bind_pointer(pStmt, 1, &s->frontier, "bfsvtab_frontier", 0);
  while( rc==SQLITE_OK && (rc = sqlite3_step(pStmt))==SQLITE_ROW ){
    i64 u = sqlite3_column_int64(pStmt, 0), v;
    int r = bfsReadId(s, pStmt, 1, zCol, &v);
    rc = SQLITE_OK;
    if( r<0 ){ rc = SQLITE_ERROR; break; }
    if( r>0 ) rc = bfsVisit(s, v, u, d);
  }
  if( rc==SQLITE_DONE ) rc = SQLITE_OK;
  if( rc!=SQLITE_OK && s->zErr==0 && rc!=SQLITE_NOMEM ){
    s->zErr = sqlite3_mprintf("bfsvtab: %s", sqlite3_errmsg(s->db));
  }
  sqlite3_reset(pStmt);
  /* A lookup answered by a full scan (or by building an automatic index) means
  ** there is no usable index: read the table once instead. */
  if( rc==SQLITE_OK && (sqlite3_stmt_status(pStmt, SQLITE_STMTSTATUS_FULLSCAN_STEP, 1)>0
                     || sqlite3_stmt_status(pStmt, SQLITE_STMTSTATUS_AUTOINDEX, 1)>0) ){
    s->bUseList = 1;
  }
  return rc;
}

/* Visit the neighbours of nodes [lo, hi), which are at distance d-1. */
static int bfsExpandLevel(BfsSearch *s, i64 lo, i64 hi, i64 d){
  BfsCursor *pCur = s->pCur;
  int rc = SQLITE_OK;
  i64 i;
  if( s->bUseList ){
    for(i=lo; i<hi && rc==SQLITE_OK; i++) rc = bfsExpandFromList(s, pCur->aNode[i].id, d);
    return rc;
  }
  s->frontier.pCur = pCur;
  s->frontier.lo = lo;
  s->frontier.hi = hi;
  if( s->direction & BFS_OUT ){
    if( s->aLookup[0]==0 ) rc = bfsPrepareLookup(s, pCur->zFrom, pCur->zTo, &s->aLookup[0]);
    if( rc==SQLITE_OK ) rc = bfsExpandFromLookup(s, s->aLookup[0], pCur->zTo, d);
  }
  if( rc==SQLITE_OK && (s->direction & BFS_IN) ){
    if( s->aLookup[1]==0 ) rc = bfsPrepareLookup(s, pCur->zTo, pCur->zFrom, &s->aLookup[1]);
    if( rc==SQLITE_OK ) rc = bfsExpandFromLookup(s, s->aLookup[1], pCur->zFrom, d);
  }
  if( rc==SQLITE_OK && s->bUseList ) rc = bfsLoadEdges(s);
  return rc;
}

static int bfsPushLevel(BfsCursor *pCur, i64 iStart, i64 *pnAlloc){
  if( pCur->nLevel+1>=*pnAlloc ){
    i64 nNew = *pnAlloc ? *pnAlloc*2 : 16;
    i64 *aNew = sqlite3_realloc64(pCur->aLevel, sizeof(i64)*(sqlite3_uint64)nNew);
    if( aNew==0 ) return SQLITE_NOMEM;
    pCur->aLevel = aNew;
    *pnAlloc = nNew;
  }
  pCur->aLevel[pCur->nLevel] = iStart;
  return SQLITE_OK;
}

/* The search itself: level by level from the root. */
static int bfsRun(BfsSearch *s){
  BfsCursor *pCur = s->pCur;
  i64 nLevelAlloc = 0;
  i64 lo = 0, hi, d = 0, i;
  int rc;
  rc = bfsAddNode(s, pCur->iRoot, 0, 0);
  if( rc==SQLITE_OK ) rc = bfsPushLevel(pCur, 0, &nLevelAlloc);
  hi = pCur->nNode;
  while( rc==SQLITE_OK && lo<hi && (pCur->iMaxDepth<0 || d<pCur->iMaxDepth) ){
    rc = bfsExpandLevel(s, lo, hi, d+1);
    if( rc!=SQLITE_OK ) break;
    pCur->nLevel++;
    rc = bfsPushLevel(pCur, hi, &nLevelAlloc);
    lo = hi;
    hi = pCur->nNode;
    d++;
  }
  if( rc!=SQLITE_OK ) return rc;
  /* Levels are contiguous; the last one pushed may be empty. */
  if( pCur->aLevel[pCur->nLevel]<pCur->nNode ){
    pCur->nLevel++;
    rc = bfsPushLevel(pCur, pCur->nNode, &nLevelAlloc);
    if( rc!=SQLITE_OK ) return rc;
  }
  for(i=0; i<pCur->nLevel; i++){
    i64 n = pCur->aLevel[i+1] - pCur->aLevel[i];
    if( n>1 ) bfsSortNodes(&pCur->aNode[pCur->aLevel[i]], n);
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------------------- */

/* A copy of a text argument, or NULL with *pzErr set when it is not usable text. */
static int bfsTextArg(sqlite3_value *pVal, const char *zName, const char *zDefault,
                      int bAllowEmpty, char **pzOut, char **pzErr){
  const unsigned char *z;
  int n;
  if( pVal==0 || sqlite3_value_type(pVal)==SQLITE_NULL ){
    if( zDefault==0 ){
      *pzErr = sqlite3_mprintf("bfsvtab: %s must not be NULL", zName);
      return SQLITE_ERROR;
    }
    *pzOut = sqlite3_mprintf("%s", zDefault);
    return *pzOut ? SQLITE_OK : SQLITE_NOMEM;
  }
  if( sqlite3_value_type(pVal)!=SQLITE_TEXT ){
    *pzErr = sqlite3_mprintf("bfsvtab: %s must be text", zName);
    return SQLITE_ERROR;
  }
  z = sqlite3_value_text(pVal);
  if( z==0 ) return SQLITE_NOMEM;
  n = sqlite3_value_bytes(pVal);
  if( (int)strlen((const char*)z)!=n ){
    *pzErr = sqlite3_mprintf("bfsvtab: %s contains a NUL character", zName);
    return SQLITE_ERROR;
  }
  if( n==0 && !bAllowEmpty ){
    *pzErr = sqlite3_mprintf("bfsvtab: %s must not be empty", zName);
    return SQLITE_ERROR;
  }
  *pzOut = sqlite3_mprintf("%s", (const char*)z);
  return *pzOut ? SQLITE_OK : SQLITE_NOMEM;
}

/* An integer argument; numeric text and integral reals are accepted. */
static int bfsIntArg(sqlite3_value *pVal, i64 *pOut){
  int t = sqlite3_value_numeric_type(pVal);
  if( t==SQLITE_INTEGER ){
    *pOut = sqlite3_value_int64(pVal);
    return 1;
  }
  if( t==SQLITE_FLOAT ){
    double r = sqlite3_value_double(pVal);
    if( r>=-9223372036854775808.0 && r<9223372036854775808.0 && r==(double)(i64)r ){
      *pOut = (i64)r;
      return 1;
    }
  }
  return 0;
}

static int bfsFilter(sqlite3_vtab_cursor *cur, int idxNum, const char *idxStr,
                     int argc, sqlite3_value **argv){
  BfsCursor *pCur = (BfsCursor*)cur;
  sqlite3_vtab *pVtab = cur->pVtab;
  sqlite3_value *aArg[BFS_NINPUT];
  BfsSearch s;
  char *zErr = 0;
  int rc = SQLITE_OK;
  int k, iArg = 0, bKeep;
  sqlite3_uint64 nPlan = 0;
  (void)idxStr;

  bfsCursorReset(pCur);
  memset(&s, 0, sizeof(s));
  s.pVtab = (BfsVtab*)pVtab;
  s.db = s.pVtab->db;
  s.pCur = pCur;

  if( idxNum & BFS_MISSING ){
    sqlite3_free(pVtab->zErrMsg);
    pVtab->zErrMsg = sqlite3_mprintf(
        "bfsvtab: the %s constraint%s required, e.g. WHERE tablename='graph_edges' AND root=1",
        (idxNum & BFS_REQUIRED)==0 ? "tablename and root" :
        (idxNum & BFS_INPUT(BFS_COL_TABLENAME)) ? "root" : "tablename",
        (idxNum & BFS_REQUIRED)==0 ? "s are" : " is");
    return SQLITE_ERROR;
  }
  for(k=0; k<BFS_NINPUT; k++){
    aArg[k] = (idxNum & (1<<k)) && iArg<argc ? argv[iArg++] : 0;
  }

  rc = bfsTextArg(aArg[0], "tablename", 0, 0, &pCur->zTable, &zErr);
  if( rc==SQLITE_OK ) rc = bfsTextArg(aArg[1], "fromcolumn", "src", 0, &pCur->zFrom, &zErr);
  if( rc==SQLITE_OK ) rc = bfsTextArg(aArg[2], "tocolumn", "dst", 0, &pCur->zTo, &zErr);
  if( rc==SQLITE_OK && !bfsIntArg(aArg[3], &pCur->iRoot) ){
    zErr = sqlite3_mprintf("bfsvtab: root must be an integer");
    rc = SQLITE_ERROR;
  }
  pCur->iMaxDepth = -1;
  if( rc==SQLITE_OK && aArg[4] && sqlite3_value_type(aArg[4])!=SQLITE_NULL ){
    if( !bfsIntArg(aArg[4], &pCur->iMaxDepth) || pCur->iMaxDepth<-1 ){
      zErr = sqlite3_mprintf("bfsvtab: max_depth must be an integer >= 0, or -1 or NULL for no limit");
      rc = SQLITE_ERROR;
    }
  }
  if( rc==SQLITE_OK ) rc = bfsTextArg(aArg[5], "direction", "out", 0, &pCur->zDirection, &zErr);
  if( rc==SQLITE_OK ){
    if( sqlite3_stricmp(pCur->zDirection, "out")==0 ) s.direction = BFS_OUT;
    else if( sqlite3_stricmp(pCur->zDirection, "in")==0 ) s.direction = BFS_IN;
    else if( sqlite3_stricmp(pCur->zDirection, "both")==0 ) s.direction = BFS_BOTH;
    else{
      zErr = sqlite3_mprintf("bfsvtab: direction must be 'out', 'in' or 'both', not '%q'", pCur->zDirection);
      rc = SQLITE_ERROR;
    }
  }
  if( rc==SQLITE_OK ) rc = bfsTextArg(aArg[6], "rels", "", 1, &pCur->zRels, &zErr);
  if( rc==SQLITE_OK && pCur->zRels[0] ){
    const char *z = pCur->zRels;
    int n = 1, i;
    for(i=0; z[i]; i++) if( z[i]==',' ) n++;
    s.azRel = sqlite3_malloc64(sizeof(char*)*(sqlite3_uint64)n);
    s.anRel = sqlite3_malloc64(sizeof(int)*(sqlite3_uint64)n);
    if( s.azRel==0 || s.anRel==0 ){
      rc = SQLITE_NOMEM;
    }else{
      const char *zStart = z;
      for(i=0; ; i++){
        if( z[i]==',' || z[i]==0 ){
          s.azRel[s.nRel] = zStart;
          s.anRel[s.nRel] = (int)(&z[i] - zStart);
          s.nRel++;
          if( z[i]==0 ) break;
          zStart = &z[i+1];
        }
      }
    }
  }

  nPlan = s.pVtab->nPlan;
  if( rc==SQLITE_OK ) rc = bfsRun(&s);

  /* bfsvtab planned while this search ran: its statements refer to bfsvtab. */
  bKeep = s.pVtab->nPlan==nPlan;
  bfsReleaseLookup(s.pVtab, s.aLookup[0], bKeep);
  bfsReleaseLookup(s.pVtab, s.aLookup[1], bKeep);
  sqlite3_free(s.aSlot);
  sqlite3_free(s.aEdge);
  sqlite3_free((void*)s.azRel);
  sqlite3_free(s.anRel);
  if( s.zErr ){
    sqlite3_free(zErr);
    zErr = s.zErr;
  }
  if( rc!=SQLITE_OK ){
    if( rc!=SQLITE_NOMEM ){
      sqlite3_free(pVtab->zErrMsg);
      pVtab->zErrMsg = zErr;
      zErr = 0;
    }
    sqlite3_free(zErr);
    bfsCursorReset(pCur);
    return rc;
  }
  sqlite3_free(zErr);
  pCur->iRow = 0;
  return SQLITE_OK;
}

/*
** bfsvtab_frontier: the ids of one level of a running search, for the level
** lookups. Its only input is a pointer bound with sqlite3_bind_pointer() under
** the type "bfsvtab_frontier", which SQL cannot forge: from SQL it is empty.
*/
typedef struct BfsFrontierCursor {
  sqlite3_vtab_cursor base;
  BfsFrontier *p;
  i64 i;
} BfsFrontierCursor;

static int bfsFrontierConnect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                              sqlite3_vtab **ppVtab, char **pzErr){
  sqlite3_vtab *p;
  int rc;
  (void)pAux; (void)argc; (void)argv; (void)pzErr;
  rc = sqlite3_declare_vtab(db, "CREATE TABLE x(id INTEGER, frontier HIDDEN)");
  if( rc!=SQLITE_OK ) return rc;
  p = sqlite3_malloc(sizeof(*p));
  if( p==0 ) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  *ppVtab = p;
  return SQLITE_OK;
}

static int bfsFrontierOpen(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCursor){
  BfsFrontierCursor *pCur;
  (void)pVtab;
  pCur = sqlite3_malloc(sizeof(*pCur));
  if( pCur==0 ) return SQLITE_NOMEM;
  memset(pCur, 0, sizeof(*pCur));
  *ppCursor = &pCur->base;
  return SQLITE_OK;
}

static int bfsFrontierClose(sqlite3_vtab_cursor *cur){
  sqlite3_free(cur);
  return SQLITE_OK;
}

static int bfsFrontierBestIndex(sqlite3_vtab *pVtab, sqlite3_index_info *p){
  int i;
  (void)pVtab;
  for(i=0; i<p->nConstraint; i++){
    if( p->aConstraint[i].iColumn!=1 || p->aConstraint[i].op!=SQLITE_INDEX_CONSTRAINT_EQ ) continue;
    if( !p->aConstraint[i].usable ) return SQLITE_CONSTRAINT;
    p->aConstraintUsage[i].argvIndex = 1;
    p->aConstraintUsage[i].omit = 1;
    p->idxNum = 1;
    p->estimatedCost = 10.0;
    p->estimatedRows = 10;
    return SQLITE_OK;
  }
  p->idxNum = 0;  /* no frontier: no rows */
  p->estimatedCost = 1.0;
  p->estimatedRows = 1;
  return SQLITE_OK;
}

static int bfsFrontierFilter(sqlite3_vtab_cursor *cur, int idxNum, const char *idxStr,
                             int argc, sqlite3_value **argv){
  BfsFrontierCursor *pCur = (BfsFrontierCursor*)cur;
  (void)idxStr;
  pCur->p = (idxNum==1 && argc==1) ? (BfsFrontier*)sqlite3_value_pointer(argv[0], "bfsvtab_frontier") : 0;
  pCur->i = pCur->p ? pCur->p->lo : 0;
  return SQLITE_OK;
}

static int bfsFrontierNext(sqlite3_vtab_cursor *cur){
  ((BfsFrontierCursor*)cur)->i++;
  return SQLITE_OK;
}

static int bfsFrontierEof(sqlite3_vtab_cursor *cur){
  BfsFrontierCursor *pCur = (BfsFrontierCursor*)cur;
  return pCur->p==0 || pCur->i>=pCur->p->hi;
}

static int bfsFrontierColumn(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int iCol){
  BfsFrontierCursor *pCur = (BfsFrontierCursor*)cur;
  if( iCol==0 ) sqlite3_result_int64(ctx, pCur->p->pCur->aNode[pCur->i].id);
  return SQLITE_OK;
}

static int bfsFrontierRowid(sqlite3_vtab_cursor *cur, sqlite_int64 *pRowid){
  *pRowid = ((BfsFrontierCursor*)cur)->i;
  return SQLITE_OK;
}

static sqlite3_module bfsFrontierModule = {
  0, 0, bfsFrontierConnect, bfsFrontierBestIndex, bfsDisconnectPlain, 0,
  bfsFrontierOpen, bfsFrontierClose, bfsFrontierFilter, bfsFrontierNext,
  bfsFrontierEof, bfsFrontierColumn, bfsFrontierRowid,
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0  /* xUpdate .. xShadowName: none */
};

static sqlite3_module bfsModule = {
  0,                /* iVersion */
  0,                /* xCreate: none, so the table is eponymous-only */
  bfsConnect,       /* xConnect */
  bfsBestIndex,     /* xBestIndex */
  bfsDisconnect,    /* xDisconnect */
  0,                /* xDestroy */
  bfsOpen,          /* xOpen */
  bfsClose,         /* xClose */
  bfsFilter,        /* xFilter */
  bfsNext,          /* xNext */
  bfsEof,           /* xEof */
  bfsColumn,        /* xColumn */
  bfsRowid,         /* xRowid */
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0  /* xUpdate .. xShadowName: none */
};

static void bfsVersionFunc(sqlite3_context *ctx, int argc, sqlite3_value **argv){
  (void)argc; (void)argv;
  sqlite3_result_text(ctx, BFSVTAB_VERSION, -1, SQLITE_STATIC);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_bfsvtab_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi){
  int rc;
  int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  SQLITE_EXTENSION_INIT2(pApi);
  if( sqlite3_libversion_number()<3025000 ){
    if( pzErrMsg ) *pzErrMsg = sqlite3_mprintf("bfsvtab needs SQLite 3.25.0 or later, not %s", sqlite3_libversion());
    return SQLITE_ERROR;
  }
  if( sqlite3_libversion_number()>=3031000 ) flags |= SQLITE_INNOCUOUS;
  rc = sqlite3_create_module(db, "bfsvtab", &bfsModule, 0);
  if( rc==SQLITE_OK ) rc = sqlite3_create_module(db, "bfsvtab_frontier", &bfsFrontierModule, 0);
  if( rc==SQLITE_OK ){
    rc = sqlite3_create_function(db, "bfsvtab_version", 0, flags, 0, bfsVersionFunc, 0, 0);
  }
  return rc;
}
