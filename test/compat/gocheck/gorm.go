package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

type gormAuthor struct {
	gorm.Model
	Name  string     `gorm:"size:100;uniqueIndex"`
	Books []gormBook `gorm:"foreignKey:AuthorID"`
}

type gormBook struct {
	ID       uint `gorm:"primaryKey"`
	AuthorID uint `gorm:"index"`
	Title    string
	Price    float64
	Released time.Time
}

// gormBookV2 is gormBook with one more column, for AutoMigrate to add.
type gormBookV2 struct {
	ID       uint `gorm:"primaryKey"`
	AuthorID uint `gorm:"index"`
	Title    string
	Price    float64
	Released time.Time
	Pages    int `gorm:"default:0"`
}

func (gormAuthor) TableName() string { return "gorm_authors" }
func (gormBook) TableName() string   { return "gorm_books" }
func (gormBookV2) TableName() string { return "gorm_books" }

// checkGorm: AutoMigrate (tables, indexes, a foreign key, then a new
// column), CRUD with soft delete, Preload, and a transaction rolled back.
func checkGorm(url string) error {
	db, err := gorm.Open(postgres.Open(url), &gorm.Config{Logger: logger.Default.LogMode(logger.Silent)})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	step("gorm", "AutoMigrate")
	if err := db.Migrator().DropTable(&gormBook{}, &gormAuthor{}); err != nil {
		return fmt.Errorf("drop: %w", err)
	}
	if err := db.AutoMigrate(&gormAuthor{}, &gormBook{}); err != nil {
		return fmt.Errorf("AutoMigrate: %w", err)
	}
	m := db.Migrator()
	if !m.HasTable(&gormAuthor{}) || !m.HasTable(&gormBook{}) || !m.HasIndex(&gormAuthor{}, "Name") ||
		!m.HasIndex(&gormBook{}, "AuthorID") || !m.HasConstraint(&gormAuthor{}, "Books") {
		return errors.New("AutoMigrate did not make the tables, indexes and foreign key")
	}
	if err := db.AutoMigrate(&gormBookV2{}); err != nil {
		return fmt.Errorf("AutoMigrate adding a column: %w", err)
	}
	if !m.HasColumn(&gormBookV2{}, "Pages") {
		return errors.New("AutoMigrate did not add pages")
	}
	// Again, with nothing to change.
	if err := db.AutoMigrate(&gormAuthor{}, &gormBookV2{}); err != nil {
		return fmt.Errorf("AutoMigrate with nothing to do: %w", err)
	}

	step("gorm", "CRUD")
	rel := time.Date(1974, 5, 1, 0, 0, 0, 0, time.UTC)
	a := gormAuthor{Name: "Ursula", Books: []gormBook{{Title: "The Dispossessed", Price: 12.5, Released: rel},
		{Title: "The Lathe of Heaven", Price: 9, Released: rel}}}
	if err := db.Create(&a).Error; err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if a.ID == 0 || a.Books[0].ID == 0 {
		return errors.New("create did not return the ids")
	}
	var got gormAuthor
	if err := db.Preload("Books", func(tx *gorm.DB) *gorm.DB { return tx.Order("title") }).
		First(&got, "name = ?", "Ursula").Error; err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	if len(got.Books) != 2 || got.Books[0].Title != "The Dispossessed" || !got.Books[0].Released.Equal(rel) {
		return fmt.Errorf("preloaded %+v", got.Books)
	}
	if err := db.Model(&gormBook{}).Where("price < ?", 10).Update("price", 10.5).Error; err != nil {
		return fmt.Errorf("update: %w", err)
	}
	var total float64
	if err := db.Model(&gormBook{}).Select("sum(price)").Scan(&total).Error; err != nil || total != 23 {
		return fmt.Errorf("sum %v: %v", total, err)
	}
	var pe *pgconn.PgError
	if err := db.Create(&gormAuthor{Name: "Ursula"}).Error; !errors.As(err, &pe) || pe.Code != "23505" {
		return fmt.Errorf("duplicate name: %v", err)
	}
	if err := db.Delete(&gormAuthor{}, a.ID).Error; err != nil {
		return fmt.Errorf("soft delete: %w", err)
	}
	var n int64
	db.Model(&gormAuthor{}).Count(&n)
	var all int64
	db.Unscoped().Model(&gormAuthor{}).Count(&all)
	if n != 0 || all != 1 {
		return fmt.Errorf("after soft delete: %d visible, %d in all", n, all)
	}

	step("gorm", "transactions")
	err = db.Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&gormAuthor{Name: "Temp"}).Error; err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		return fmt.Errorf("transaction: %v", err)
	}
	if db.Unscoped().Model(&gormAuthor{}).Where("name = ?", "Temp").Count(&n); n != 0 {
		return errors.New("the rolled back row is there")
	}
	return db.Migrator().DropTable(&gormBook{}, &gormAuthor{})
}
