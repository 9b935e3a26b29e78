/*
** Memory-safety test for bfsvtab: every code path (lookups through an index,
** the in-memory edge list, errors) and an out-of-memory failure injected at
** every allocation in turn. Run under AddressSanitizer/LeakSanitizer with
** `make test`; it also checks that SQLite's own count of allocated memory
** is back to zero once the connection is closed.
**
** bfsvtab.c is compiled into this program (SQLITE_CORE) against the system
** libsqlite3; the correctness of the results is tested from Python
** (tests/store/test_bfs.py), here they are only compared with a fault-free run.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sqlite3.h"

#include "bfsvtab.c"

static sqlite3_mem_methods defaultMem;
static long long nAllocLeft = -1;  /* -1: no fault; else allocations before failing */
static int nFaults = 0;

static int faultCheck(void){
  if( nAllocLeft<0 ) return 0;
  if( nAllocLeft==0 ){ nFaults++; return 1; }
  nAllocLeft--;
  return 0;
}
static void *faultMalloc(int n){ return faultCheck() ? 0 : defaultMem.xMalloc(n); }
static void *faultRealloc(void *p, int n){ return faultCheck() ? 0 : defaultMem.xRealloc(p, n); }

static int nFail = 0;
#define CHECK(cond, ...) do{ if(!(cond)){ nFail++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
  fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } }while(0)

/* Run a query; put its rows (or its error) in a malloc'd string. Returns the rc. */
static int run(sqlite3 *db, const char *zSql, char **pzOut){
  sqlite3_stmt *pStmt = 0;
  size_t nOut = 0, nAlloc = 256;
  char *zOut = malloc(nAlloc);
  int rc, i;
  zOut[0] = 0;
  rc = sqlite3_prepare_v2(db, zSql, -1, &pStmt, 0);
  while( rc==SQLITE_OK && (rc = sqlite3_step(pStmt))==SQLITE_ROW ){
    for(i=0; i<sqlite3_column_count(pStmt); i++){
      const char *z = (const char*)sqlite3_column_text(pStmt, i);
      size_t n = strlen(z ? z : "NULL") + 2;
      if( nOut+n+1>nAlloc ){ nAlloc = 2*(nOut+n+1); zOut = realloc(zOut, nAlloc); }
      nOut += (size_t)sprintf(zOut+nOut, "%s%c", z ? z : "NULL", i+1<sqlite3_column_count(pStmt) ? '|' : '\n');
    }
    rc = SQLITE_OK;
  }
  if( rc==SQLITE_DONE ) rc = SQLITE_OK;
  if( rc!=SQLITE_OK ){
    const char *zErr = sqlite3_errmsg(db);
    zOut = realloc(zOut, nOut + strlen(zErr) + 16);
    sprintf(zOut+nOut, "error: %s", zErr);
  }
  sqlite3_finalize(pStmt);
  *pzOut = zOut;
  return rc;
}

static void expectError(sqlite3 *db, const char *zSql, const char *zMsg){
  char *zOut;
  int rc = run(db, zSql, &zOut);
  CHECK(rc!=SQLITE_OK && strstr(zOut, zMsg)!=0, "%s\n  expected an error with '%s', got rc=%d: %s", zSql, zMsg, rc, zOut);
  free(zOut);
}

static void expectRows(sqlite3 *db, const char *zSql, const char *zRows){
  char *zOut;
  int rc = run(db, zSql, &zOut);
  CHECK(rc==SQLITE_OK && strcmp(zOut, zRows)==0, "%s\n  expected:\n%s\n  got rc=%d:\n%s", zSql, zRows, rc, zOut);
  free(zOut);
}

/* The query must give the fault-free result or fail with SQLITE_NOMEM, whatever allocation fails. */
static void oomLoop(sqlite3 *db, const char *zSql){
  char *zWant, *zOut;
  long long n;
  int rc = run(db, zSql, &zWant);
  CHECK(rc==SQLITE_OK, "%s: %s", zSql, zWant);
  for(n=0; ; n++){
    nFaults = 0;
    nAllocLeft = n;
    rc = run(db, zSql, &zOut);
    nAllocLeft = -1;
    if( nFaults==0 ){
      CHECK(rc==SQLITE_OK && strcmp(zOut, zWant)==0, "no fault, yet: %s", zOut);
      free(zOut);
      break;
    }
    CHECK(rc==SQLITE_NOMEM || (rc==SQLITE_OK && strcmp(zOut, zWant)==0),
          "fault after %lld allocations: rc=%d %s", n, rc, zOut);
    free(zOut);
  }
  printf("  oom: %lld injection points, %s\n", n, zSql);
  free(zWant);
}

static void exec(sqlite3 *db, const char *zSql){
  char *zErr = 0;
  int rc = sqlite3_exec(db, zSql, 0, 0, &zErr);
  CHECK(rc==SQLITE_OK, "%s: %s", zSql, zErr);
  sqlite3_free(zErr);
}

int main(void){
  sqlite3 *db;
  char *zErr = 0;
  sqlite3_mem_methods mem;
  int rc;

  sqlite3_config(SQLITE_CONFIG_GETMALLOC, &defaultMem);
  mem = defaultMem;
  mem.xMalloc = faultMalloc;
  mem.xRealloc = faultRealloc;
  sqlite3_config(SQLITE_CONFIG_MALLOC, &mem);
  sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0);  /* every allocation goes through xMalloc */
  sqlite3_initialize();

  rc = sqlite3_open(":memory:", &db);
  CHECK(rc==SQLITE_OK, "open");
  rc = sqlite3_bfsvtab_init(db, &zErr, 0);
  CHECK(rc==SQLITE_OK, "init: %s", zErr ? zErr : "");
  sqlite3_free(zErr);

  expectRows(db, "SELECT bfsvtab_version()", "1.0.0\n");

  /* A small graph with a cycle, a self-loop, a NULL and two relation types,
  ** as a table without index (edge list) and as an indexed table behind a view (lookups). */
  exec(db,
    "CREATE TABLE g(src INTEGER, dst INTEGER, rel TEXT);"
    "INSERT INTO g VALUES (1,2,'a'),(2,3,'b'),(3,1,'a'),(1,4,'a'),(4,3,'a'),(3,3,'a'),(5,NULL,'a'),(NULL,1,'a');"
    "CREATE TABLE r(id INTEGER PRIMARY KEY, src_id INTEGER NOT NULL, dst_id INTEGER NOT NULL, rel TEXT NOT NULL);"
    "CREATE INDEX r_src ON r(src_id, rel); CREATE INDEX r_dst ON r(dst_id, rel);"
    "INSERT INTO r(src_id, dst_id, rel) SELECT src, dst, rel FROM g WHERE src NOT NULL AND dst NOT NULL;"
    "CREATE VIEW v AS SELECT src_id AS src, dst_id AS dst, rel FROM r;");
  {
    const char *azTab[] = {"g", "v"};
    int i;
    for(i=0; i<2; i++){
      char *zSql;
      zSql = sqlite3_mprintf("SELECT id, parent, distance, path FROM bfsvtab WHERE tablename='%s' AND root=1", azTab[i]);
      expectRows(db, zSql, "1|NULL|0|1\n2|1|1|1,2\n4|1|1|1,4\n3|2|2|1,2,3\n");
      sqlite3_free(zSql);
      zSql = sqlite3_mprintf("SELECT id, parent, distance FROM bfsvtab WHERE tablename='%s' AND root=3 AND direction='in' AND rels='a'", azTab[i]);
      expectRows(db, zSql, "3|NULL|0\n4|3|1\n1|4|2\n");
      sqlite3_free(zSql);
      zSql = sqlite3_mprintf("SELECT id, parent, distance FROM bfsvtab WHERE tablename='%s' AND root=2 AND direction='both' AND max_depth=1", azTab[i]);
      expectRows(db, zSql, "2|NULL|0\n1|2|1\n3|2|1\n");
      sqlite3_free(zSql);
      zSql = sqlite3_mprintf("SELECT id FROM bfsvtab WHERE tablename='%s' AND root=99", azTab[i]);
      expectRows(db, zSql, "99\n");
      sqlite3_free(zSql);
    }
  }
  expectRows(db, "SELECT count(*) FROM bfsvtab WHERE tablename='g' AND root IN (1,3)", "8\n");
  expectRows(db, "SELECT tablename, fromcolumn, tocolumn, root, max_depth, direction, rels FROM bfsvtab WHERE tablename='g' AND root=7",
             "g|src|dst|7|-1|out|\n");

  expectError(db, "SELECT * FROM bfsvtab", "tablename and root constraints are required");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g'", "root constraint is required");
  expectError(db, "SELECT * FROM bfsvtab WHERE root=1", "tablename constraint is required");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g; DROP TABLE g' AND root=1", "no such table");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g\" WHERE 1; --' AND root=1", "no such table");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND fromcolumn='nosuch'", "no such column");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND tocolumn='rel'", "non-integer value");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g' AND root='x'", "root must be an integer");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND direction='up'", "direction must be");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='g' AND root=1 AND max_depth=-5", "max_depth must be");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename='' AND root=1", "tablename must not be empty");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename=NULL AND root=1", "tablename must not be NULL");
  expectError(db, "SELECT * FROM bfsvtab WHERE tablename=3 AND root=1", "tablename must be text");
  expectRows(db, "SELECT count(*) FROM sqlite_master WHERE name='g'", "1\n");

  /* A larger random graph: arrays and the hash set grow many times. */
  exec(db,
    "CREATE TABLE big(src INTEGER, dst INTEGER, rel TEXT);"
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i<20000)"
    " INSERT INTO big SELECT abs(random())%5000, abs(random())%5000, 'r' || (i%3) FROM n;"
    "CREATE TABLE bigi AS SELECT * FROM big; CREATE INDEX bigi_src ON bigi(src); CREATE INDEX bigi_dst ON bigi(dst);");
  {
    char *zA, *zB;
    run(db, "SELECT id, parent, distance, path FROM bfsvtab WHERE tablename='big' AND root=1 AND direction='both'", &zA);
    run(db, "SELECT id, parent, distance, path FROM bfsvtab WHERE tablename='bigi' AND root=1 AND direction='both'", &zB);
    CHECK(strcmp(zA, zB)==0 && strlen(zA)>1000, "edge list and lookups disagree");
    free(zA); free(zB);
  }

  /* An edge view that runs bfsvtab itself: its lookups must not be kept (they would
  ** keep bfsvtab connected, and sqlite3_close() would fail on them). */
  exec(db, "CREATE VIEW tree AS SELECT parent AS src, id AS dst, 'a' AS rel FROM bfsvtab"
           " WHERE tablename='g' AND root=1 AND parent IS NOT NULL");
  expectRows(db, "SELECT id, parent, distance FROM bfsvtab WHERE tablename='tree' AND root=2 AND direction='both'",
             "2|NULL|0\n1|2|1\n3|2|1\n4|1|2\n");
  expectRows(db, "SELECT id, parent, distance FROM bfsvtab WHERE tablename='tree' AND root=2 AND direction='both'",
             "2|NULL|0\n1|2|1\n3|2|1\n4|1|2\n");

  printf("out-of-memory injection:\n");
  oomLoop(db, "SELECT id, parent, distance, path FROM bfsvtab WHERE tablename='g' AND root=1 AND direction='both'");
  oomLoop(db, "SELECT id, parent, distance, path FROM bfsvtab WHERE tablename='v' AND root=1 AND rels='a,b'");
  oomLoop(db, "SELECT id, parent, distance FROM bfsvtab WHERE tablename='bigi' AND root=1 AND max_depth=2");
  oomLoop(db, "SELECT count(*), sum(length(path)) FROM bfsvtab WHERE tablename='big' AND root=1 AND direction='in' AND max_depth=2");
  oomLoop(db, "SELECT id, parent, distance FROM bfsvtab WHERE tablename='tree' AND root=2 AND direction='both'");

  rc = sqlite3_close(db);
  CHECK(rc==SQLITE_OK, "close: %d", rc);
  CHECK(sqlite3_memory_used()==0, "%lld bytes still allocated by SQLite after close", sqlite3_memory_used());
  sqlite3_shutdown();
  printf("%s (%d failure%s)\n", nFail ? "FAILED" : "ok", nFail, nFail==1 ? "" : "s");
  return nFail!=0;
}
