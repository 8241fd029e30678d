import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;

/**
 * pgjdbc against Cairn: plain queries, prepared statements, batches,
 * errors, and the DatabaseMetaData calls that DBeaver, DataGrip and
 * Hibernate's schema validation make. Run by test/compat/run.sh (java
 * runs the source file directly, with the driver jar Maven fetched) with
 * a jdbc:postgresql URL; each check runs on its own and a failure of any
 * makes the exit status 1. Against PostgreSQL 15 every check passes
 * too.
 */
public class JdbcCheck {
  interface Check {
    void run(Connection c) throws Exception;
  }

  static final List<String> failures = new ArrayList<>();
  static String url;

  static void check(String name, Check fn) {
    try (Connection c = DriverManager.getConnection(url, "postgres", "")) {
      fn.run(c);
      System.out.println("jdbc: " + name + " ok");
    } catch (Throwable e) {
      failures.add(name);
      System.out.println("jdbc: " + name + " FAILED: " + e);
    }
  }

  static void expect(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static List<String> column(ResultSet rs, String col) throws SQLException {
    List<String> out = new ArrayList<>();
    while (rs.next()) {
      out.add(rs.getString(col));
    }
    rs.close();
    return out;
  }

  public static void main(String[] args) throws Exception {
    url = args[0];
    try (Connection c = DriverManager.getConnection(url, "postgres", "");
        Statement st = c.createStatement()) {
      st.execute("DROP TABLE IF EXISTS jdbc_child, jdbc_parent");
      st.execute("CREATE TABLE jdbc_parent (id int PRIMARY KEY, code varchar(10) NOT NULL UNIQUE)");
      st.execute("CREATE TABLE jdbc_child (id bigserial PRIMARY KEY, parent_id int NOT NULL"
          + " REFERENCES jdbc_parent (id), qty numeric(8,2), note text)");
      st.execute("CREATE INDEX jdbc_child_parent_idx ON jdbc_child (parent_id, qty)");
      // A key whose columns are not in table order: KEY_SEQ must follow
      // the key, not the table.
      st.execute("DROP TABLE IF EXISTS jdbc_multi");
      st.execute("CREATE TABLE jdbc_multi (a int, b text, c int, PRIMARY KEY (c, a))");
      st.execute("CREATE UNIQUE INDEX jdbc_multi_b_c ON jdbc_multi (b DESC, c)");
    }

    check("queries_and_errors", c -> {
      try (Statement st = c.createStatement()) {
        ResultSet rs = st.executeQuery("SELECT version()");
        expect(rs.next() && rs.getString(1).contains("PostgreSQL 15"), "version");
        try {
          st.executeQuery("SELECT * FROM no_such_table");
          expect(false, "no error");
        } catch (SQLException e) {
          expect("42P01".equals(e.getSQLState()), "state " + e.getSQLState());
        }
      }
    });

    check("prepared_and_batch", c -> {
      c.setAutoCommit(false);
      try (PreparedStatement ps = c.prepareStatement("INSERT INTO jdbc_parent (id, code) VALUES (?, ?)")) {
        for (int i = 1; i <= 10; i++) { // past prepareThreshold: server-side prepared
          ps.setInt(1, i);
          ps.setString(2, "c" + i);
          ps.addBatch();
        }
        int[] n = ps.executeBatch();
        expect(n.length == 10, "batch " + n.length);
      }
      c.commit();
      try (PreparedStatement ps = c.prepareStatement("SELECT code FROM jdbc_parent WHERE id = ?")) {
        for (int i = 1; i <= 8; i++) {
          ps.setInt(1, i);
          ResultSet rs = ps.executeQuery();
          expect(rs.next() && rs.getString(1).equals("c" + i), "row " + i);
        }
      }
      c.commit();
    });

    check("metadata_tables_columns", c -> {
      DatabaseMetaData md = c.getMetaData();
      expect(md.getDatabaseProductName().equals("PostgreSQL"), md.getDatabaseProductName());
      List<String> tables = new ArrayList<>();
      ResultSet rs = md.getTables(null, "public", "jdbc_%", new String[] {"TABLE"});
      while (rs.next()) {
        tables.add(rs.getString("TABLE_NAME") + ":" + rs.getString("TABLE_TYPE"));
      }
      rs.close();
      expect(tables.equals(List.of("jdbc_child:TABLE", "jdbc_multi:TABLE", "jdbc_parent:TABLE")), "tables " + tables);
      // DBeaver's and Hibernate's column metadata: types, sizes,
      // nullability, defaults, auto-increment.
      List<String> cols = new ArrayList<>();
      rs = md.getColumns(null, "public", "jdbc_child", "%");
      while (rs.next()) {
        cols.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME") + ":" + rs.getInt("DATA_TYPE") + ":"
            + rs.getInt("COLUMN_SIZE") + ":" + rs.getInt("DECIMAL_DIGITS") + ":" + rs.getString("IS_NULLABLE") + ":"
            + rs.getString("IS_AUTOINCREMENT") + ":" + rs.getInt("ORDINAL_POSITION"));
      }
      rs.close();
      expect(cols.equals(List.of("id:bigserial:-5:19:0:NO:YES:1", "parent_id:int4:4:10:0:NO:NO:2",
          "qty:numeric:2:8:2:YES:NO:3", "note:text:12:2147483647:0:YES:NO:4")), "columns " + cols);
      List<String> schemas = column(md.getSchemas(), "TABLE_SCHEM");
      expect(schemas.contains("public") && schemas.contains("pg_catalog") && schemas.contains("information_schema"),
          "schemas " + schemas);
      List<String> filtered = column(md.getSchemas(null, "pub%"), "TABLE_SCHEM");
      expect(filtered.equals(List.of("public")), "schemas like pub% " + filtered);
    });

    check("metadata_primary_keys", c -> {
      DatabaseMetaData md = c.getMetaData();
      List<String> pk = column(md.getPrimaryKeys(null, "public", "jdbc_child"), "COLUMN_NAME");
      expect(pk.equals(List.of("id")), "pk " + pk);
      List<String> keys = new ArrayList<>();
      ResultSet rs = md.getPrimaryKeys(null, "public", "jdbc_multi");
      while (rs.next()) {
        keys.add(rs.getString("COLUMN_NAME") + ":" + rs.getInt("KEY_SEQ") + ":" + rs.getString("PK_NAME"));
      }
      rs.close();
      expect(keys.equals(List.of("c:1:jdbc_multi_pkey", "a:2:jdbc_multi_pkey")), "composite pk " + keys);
    });

    check("metadata_index_info", c -> {
      List<String> ix = new ArrayList<>();
      ResultSet rs = c.getMetaData().getIndexInfo(null, "public", "jdbc_child", false, false);
      while (rs.next()) {
        ix.add(rs.getString("INDEX_NAME") + ":" + rs.getInt("ORDINAL_POSITION") + ":" + rs.getString("COLUMN_NAME")
            + ":" + rs.getBoolean("NON_UNIQUE"));
      }
      rs.close();
      expect(ix.equals(List.of("jdbc_child_pkey:1:id:false", "jdbc_child_parent_idx:1:parent_id:true",
          "jdbc_child_parent_idx:2:qty:true")), "indexes " + ix);
      List<String> uniq = new ArrayList<>();
      rs = c.getMetaData().getIndexInfo(null, "public", "jdbc_multi", true, false);
      while (rs.next()) {
        uniq.add(rs.getString("INDEX_NAME") + ":" + rs.getString("COLUMN_NAME") + ":" + rs.getString("ASC_OR_DESC"));
      }
      rs.close();
      expect(uniq.equals(List.of("jdbc_multi_b_c:b:D", "jdbc_multi_b_c:c:A", "jdbc_multi_pkey:c:A",
          "jdbc_multi_pkey:a:A")), "unique indexes " + uniq);
    });

    check("metadata_imported_keys", c -> {
      DatabaseMetaData md = c.getMetaData();
      List<String> fk = new ArrayList<>();
      ResultSet rs = md.getImportedKeys(null, "public", "jdbc_child");
      while (rs.next()) {
        fk.add(rs.getString("PKTABLE_NAME") + "." + rs.getString("PKCOLUMN_NAME") + "<-" + rs.getString("FKTABLE_NAME")
            + "." + rs.getString("FKCOLUMN_NAME") + ":" + rs.getInt("KEY_SEQ") + ":" + rs.getString("FK_NAME") + ":"
            + rs.getString("PK_NAME"));
      }
      rs.close();
      List<String> want = List.of("jdbc_parent.id<-jdbc_child.parent_id:1:jdbc_child_parent_id_fkey:jdbc_parent_pkey");
      expect(fk.equals(want), "imported keys " + fk);
      List<String> ek = new ArrayList<>();
      rs = md.getExportedKeys(null, "public", "jdbc_parent");
      while (rs.next()) {
        ek.add(rs.getString("PKTABLE_NAME") + "." + rs.getString("PKCOLUMN_NAME") + "<-" + rs.getString("FKTABLE_NAME")
            + "." + rs.getString("FKCOLUMN_NAME") + ":" + rs.getInt("KEY_SEQ") + ":" + rs.getString("FK_NAME") + ":"
            + rs.getString("PK_NAME"));
      }
      rs.close();
      expect(ek.equals(want), "exported keys " + ek);
    });

    check("metadata_sql_keywords", c -> {
      // getSQLKeywords reads pg_get_keywords(); DBeaver and Hibernate ask.
      List<String> kw = List.of(c.getMetaData().getSQLKeywords().split(","));
      expect(kw.contains("returning") && kw.contains("ilike") && !kw.contains("select"), "keywords " + kw.size());
    });

    check("dbeaver_navigator", c -> {
      // Catalog queries of the kind DBeaver's PostgreSQL navigator runs
      // (its own SQL, not DatabaseMetaData's), with what they must find.
      try (Statement st = c.createStatement()) {
        List<String> dbs = column(st.executeQuery("SELECT db.oid,db.* FROM pg_catalog.pg_database db"
            + " WHERE datallowconn AND NOT datistemplate ORDER BY db.datname"), "datname");
        expect(dbs.contains("postgres"), "databases " + dbs);
        List<String> nsps = column(st.executeQuery("SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n"
            + " LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0"
            + " AND d.classoid='pg_namespace'::regclass ORDER BY nspname"), "nspname");
        expect(nsps.contains("public") && nsps.contains("pg_catalog"), "schemas " + nsps);
        List<String> rels = column(st.executeQuery("SELECT c.oid,c.*,t.relname AS tabrelname,rt.relnamespace AS refnamespace,"
            + "d.description, CASE WHEN c.relkind='p' THEN pg_get_partkeydef(c.oid) ELSE NULL END AS partition_key"
            + " FROM pg_catalog.pg_class c LEFT OUTER JOIN pg_catalog.pg_class t ON t.oid=c.reltoastrelid"
            + " LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.reloftype LEFT OUTER JOIN pg_catalog.pg_description d"
            + " ON d.objoid=c.oid AND d.classoid='pg_class'::regclass AND d.objsubid=0"
            + " WHERE c.relnamespace='public'::regnamespace AND c.relkind NOT IN ('i','I','c') AND c.relname LIKE 'jdbc_%'"
            + " ORDER BY c.relname"), "relname");
        expect(rels.equals(List.of("jdbc_child", "jdbc_child_id_seq", "jdbc_multi", "jdbc_parent")), "relations " + rels);
        List<String> cols = new ArrayList<>();
        ResultSet rs = st.executeQuery("SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) AS def_value,"
            + "dsc.description,dep.objid FROM pg_catalog.pg_attribute a INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)"
            + " LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum)"
            + " LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)"
            + " LEFT OUTER JOIN pg_depend dep ON dep.refobjid = a.attrelid AND dep.deptype = 'i'"
            + " AND dep.refobjsubid = a.attnum AND dep.classid = dep.refclassid"
            + " WHERE NOT a.attisdropped AND c.relkind NOT IN ('i','I','c') AND c.oid='jdbc_child'::regclass"
            + " AND a.attnum > 0 ORDER BY a.attnum");
        while (rs.next()) {
          cols.add(rs.getString("attname") + "=" + rs.getString("def_value"));
        }
        rs.close();
        expect(cols.equals(List.of("id=nextval('jdbc_child_id_seq'::regclass)", "parent_id=null", "qty=null",
            "note=null")), "columns " + cols);
        List<String> cons = column(st.executeQuery("SELECT c.oid,pg_catalog.pg_get_constraintdef(c.oid, true) AS consrc,"
            + "c.*,t.relname AS tabrelname,CASE WHEN c.confrelid IS NOT NULL AND c.confrelid <> 0 THEN"
            + " (SELECT relname FROM pg_catalog.pg_class WHERE oid = c.confrelid) END AS reftabname"
            + " FROM pg_catalog.pg_constraint c LEFT JOIN pg_catalog.pg_class t ON c.conrelid=t.oid"
            + " WHERE t.relname = 'jdbc_child' ORDER BY c.conname"), "consrc");
        expect(cons.equals(List.of("FOREIGN KEY (parent_id) REFERENCES jdbc_parent(id)", "PRIMARY KEY (id)")),
            "constraints " + cons);
        List<String> idx = column(st.executeQuery("SELECT i.*,c.relnamespace,c.relname,"
            + " pg_catalog.pg_get_indexdef(i.indexrelid) AS indexdef, c.relam, am.amname FROM pg_catalog.pg_index i"
            + " INNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid LEFT JOIN pg_catalog.pg_am am ON am.oid=c.relam"
            + " WHERE i.indrelid='jdbc_child'::regclass ORDER BY c.relname"), "indexdef");
        expect(idx.equals(List.of("CREATE INDEX jdbc_child_parent_idx ON public.jdbc_child USING btree (parent_id, qty)",
            "CREATE UNIQUE INDEX jdbc_child_pkey ON public.jdbc_child USING btree (id)")), "indexes " + idx);
        List<String> roles = column(st.executeQuery("SELECT a.oid,a.* FROM pg_catalog.pg_roles a ORDER BY a.rolname"), "rolname");
        expect(roles.contains("postgres"), "roles " + roles);
      }
    });

    check("metadata_type_info", c -> {
      // pgjdbc maps each pg_type row to a java.sql.Types code; it tells
      // arrays by typinput = 'array_in'::regproc.
      java.util.Map<String, Integer> types = new java.util.HashMap<>();
      ResultSet rs = c.getMetaData().getTypeInfo();
      while (rs.next()) {
        types.put(rs.getString("TYPE_NAME"), rs.getInt("DATA_TYPE"));
      }
      rs.close();
      for (var want : java.util.Map.of("int4", java.sql.Types.INTEGER, "int8", java.sql.Types.BIGINT,
          "text", java.sql.Types.VARCHAR, "numeric", java.sql.Types.NUMERIC, "bool", java.sql.Types.BIT,
          "timestamptz", java.sql.Types.TIMESTAMP, "_int4", java.sql.Types.ARRAY, "_text", java.sql.Types.ARRAY,
          "uuid", java.sql.Types.OTHER).entrySet()) {
        expect(want.getValue().equals(types.get(want.getKey())),
            want.getKey() + ": DATA_TYPE " + types.get(want.getKey()) + ", want " + want.getValue());
      }
    });

    check("array_columns", c -> {
      // getColumns' DATA_TYPE for an array column goes through the same
      // typinput test; getArray reads the value.
      try (Statement st = c.createStatement()) {
        st.execute("DROP TABLE IF EXISTS jdbc_arr");
        st.execute("CREATE TABLE jdbc_arr (id int PRIMARY KEY, tags text[])");
        st.execute("INSERT INTO jdbc_arr VALUES (1, ARRAY['a', 'b c'])");
        ResultSet rs = c.getMetaData().getColumns(null, "public", "jdbc_arr", "tags");
        expect(rs.next() && rs.getInt("DATA_TYPE") == java.sql.Types.ARRAY && rs.getString("TYPE_NAME").equals("_text"),
            "tags column metadata");
        rs.close();
        rs = st.executeQuery("SELECT tags FROM jdbc_arr");
        expect(rs.next(), "a row");
        String[] tags = (String[]) rs.getArray(1).getArray();
        expect(java.util.Arrays.equals(tags, new String[] {"a", "b c"}), "tags " + java.util.Arrays.toString(tags));
        st.execute("DROP TABLE jdbc_arr");
      }
    });

    if (!failures.isEmpty()) {
      System.out.println("jdbc: FAILED: " + String.join(", ", failures));
      System.exit(1);
    }
    System.out.println("jdbc: all checks ok");
  }
}
