import jakarta.persistence.Column;
import jakarta.persistence.Entity;
import jakarta.persistence.GeneratedValue;
import jakarta.persistence.GenerationType;
import jakarta.persistence.Id;
import jakarta.persistence.JoinColumn;
import jakarta.persistence.ManyToOne;
import jakarta.persistence.OneToMany;
import jakarta.persistence.SequenceGenerator;
import jakarta.persistence.Table;
import java.math.BigDecimal;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import org.hibernate.SessionFactory;
import org.hibernate.cfg.Configuration;

/**
 * Hibernate ORM against Cairn through pgjdbc, run by test/compat/run.sh
 * (java on this source file, with the classpath Maven resolved from
 * pom.xml) with a jdbc:postgresql URL: Hibernate creates the schema
 * (hbm2ddl create: tables, an identity column, a sequence, a foreign key,
 * a unique constraint), validates it (hbm2ddl validate, which reads
 * DatabaseMetaData and information_schema.sequences), fails validation
 * once a mapped column is missing, and runs CRUD and HQL. Every step
 * asserts what it read back; the exit status is 1 on the first failure.
 */
public class HibernateCheck {
  @Entity
  @Table(name = "hib_author")
  public static class Author {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    public Long id;

    @Column(nullable = false, length = 100, unique = true)
    public String name;

    @OneToMany(mappedBy = "author")
    public List<Book> books = new ArrayList<>();
  }

  @Entity
  @Table(name = "hib_book")
  public static class Book {
    @Id
    @GeneratedValue(strategy = GenerationType.SEQUENCE, generator = "hib_book_seq")
    @SequenceGenerator(name = "hib_book_seq", sequenceName = "hib_book_seq", allocationSize = 1)
    public Long id;

    @ManyToOne(optional = false)
    @JoinColumn(name = "author_id")
    public Author author;

    @Column(nullable = false)
    public String title;

    @Column(precision = 8, scale = 2)
    public BigDecimal price;

    public LocalDate released;
  }

  static String url;

  static SessionFactory factory(String mode) {
    return new Configuration()
        .addAnnotatedClass(Author.class)
        .addAnnotatedClass(Book.class)
        .setProperty("jakarta.persistence.jdbc.url", url)
        .setProperty("jakarta.persistence.jdbc.user", "postgres")
        .setProperty("jakarta.persistence.jdbc.password", "")
        .setProperty("hibernate.hbm2ddl.auto", mode)
        .setProperty("hibernate.show_sql", "false")
        .buildSessionFactory();
  }

  static void expect(boolean ok, String what) {
    if (!ok) {
      throw new AssertionError(what);
    }
  }

  static void sql(String... stmts) throws Exception {
    try (Connection c = DriverManager.getConnection(url, "postgres", ""); Statement st = c.createStatement()) {
      for (String s : stmts) {
        st.execute(s);
      }
    }
  }

  public static void main(String[] args) throws Exception {
    url = args[0];
    // java runs this file from source: its classes live in the launcher's
    // in-memory class loader, which Hibernate finds through the context.
    Thread.currentThread().setContextClassLoader(HibernateCheck.class.getClassLoader());
    java.util.logging.Logger.getLogger("org.hibernate").setLevel(java.util.logging.Level.SEVERE);
    try {
      sql("DROP TABLE IF EXISTS hib_book, hib_author", "DROP SEQUENCE IF EXISTS hib_book_seq");

      System.out.println("hibernate: hbm2ddl create");
      factory("create").close();

      System.out.println("hibernate: hbm2ddl validate");
      factory("validate").close();

      System.out.println("hibernate: validate fails on a missing column");
      sql("ALTER TABLE hib_book DROP COLUMN released");
      try {
        factory("validate").close();
        expect(false, "validation passed without hib_book.released");
      } catch (org.hibernate.tool.schema.spi.SchemaManagementException e) {
        expect(e.getMessage().contains("released"), "validation error: " + e.getMessage());
      }
      sql("ALTER TABLE hib_book ADD COLUMN released date");

      System.out.println("hibernate: CRUD and HQL");
      try (SessionFactory sf = factory("validate")) {
        Long authorId = sf.fromTransaction(s -> {
          Author a = new Author();
          a.name = "Ursula";
          s.persist(a);
          for (int i = 1; i <= 3; i++) {
            Book b = new Book();
            b.author = a;
            b.title = "Book " + i;
            b.price = new BigDecimal(i + "0.50");
            b.released = LocalDate.of(1970 + i, 1, 1);
            s.persist(b);
          }
          return a.id;
        });
        expect(authorId != null, "no identity value");
        List<String> titles = sf.fromTransaction(s -> s.createSelectionQuery(
                "select b.title from HibernateCheck$Book b join b.author a where a.name = :n and b.price > :p order by b.title",
                String.class)
            .setParameter("n", "Ursula").setParameter("p", new BigDecimal("15")).getResultList());
        expect(titles.equals(List.of("Book 2", "Book 3")), "titles " + titles);
        sf.inTransaction(s -> {
          Author a = s.find(Author.class, authorId);
          expect(a != null && a.books.size() == 3, "author and books");
          a.books.get(0).price = new BigDecimal("99.99");
        });
        BigDecimal max = sf.fromTransaction(s -> s.createSelectionQuery(
            "select max(b.price) from HibernateCheck$Book b", BigDecimal.class).getSingleResult());
        expect(max.compareTo(new BigDecimal("99.99")) == 0, "max price " + max);
        int deleted = sf.fromTransaction(s -> s.createMutationQuery(
            "delete from HibernateCheck$Book b where b.price < 50").executeUpdate());
        expect(deleted == 2, "deleted " + deleted);
        try {
          sf.inTransaction(s -> {
            Author dup = new Author();
            dup.name = "Ursula";
            s.persist(dup);
          });
          expect(false, "duplicate name accepted");
        } catch (org.hibernate.exception.ConstraintViolationException e) {
          expect("23505".equals(e.getSQLState()), "duplicate: " + e.getSQLState());
        }
      }
      sql("DROP TABLE hib_book, hib_author", "DROP SEQUENCE hib_book_seq");
    } catch (Throwable e) {
      e.printStackTrace(System.out);
      System.out.println("hibernate: FAILED: " + e);
      System.exit(1);
    }
    System.out.println("hibernate: all checks ok (Hibernate " + org.hibernate.Version.getVersionString() + ")");
  }
}
