// Package items is the catalogue API's domain: the items it serves, the
// /v1/score request and its answer, with their validation, scoring and
// JSON encodings. It knows nothing of HTTP, so that the catalog workload
// and the benchmark's peers (tests/peers/fasthttpapi, nethttpapi) serve
// the same data and answer byte for byte alike.
package items

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/hotpath-dev/hotpath/server/jsonenc"
)

// Item is one entry of the catalogue. Its JSON (AppendJSON) is what
// encoding/json.Marshal writes for it, field for field.
type Item struct {
	ID         int64    `json:"id"`
	SKU        string   `json:"sku"`
	Name       string   `json:"name"`
	Category   string   `json:"category"`
	PriceCents int64    `json:"price_cents"`
	Currency   string   `json:"currency"`
	Stock      int      `json:"stock"`
	Rating     float64  `json:"rating"`
	Tags       []string `json:"tags"`
	Active     bool     `json:"active"`
}

var (
	nID, nSKU, nName, nCategory = jsonenc.NewName("id"), jsonenc.NewName("sku"), jsonenc.NewName("name"), jsonenc.NewName("category")
	nPrice, nCurrency, nStock   = jsonenc.NewName("price_cents"), jsonenc.NewName("currency"), jsonenc.NewName("stock")
	nRating, nTags, nActive     = jsonenc.NewName("rating"), jsonenc.NewName("tags"), jsonenc.NewName("active")
)

// AppendJSON appends the item's JSON to dst.
func (it *Item) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Name(nID)
	e.Int(it.ID)
	e.Name(nSKU)
	e.String(it.SKU)
	e.Name(nName)
	e.String(it.Name)
	e.Name(nCategory)
	e.String(it.Category)
	e.Name(nPrice)
	e.Int(it.PriceCents)
	e.Name(nCurrency)
	e.String(it.Currency)
	e.Name(nStock)
	e.Int(int64(it.Stock))
	e.Name(nRating)
	e.Float64(it.Rating)
	e.Name(nTags)
	if it.Tags == nil {
		e.Null()
	} else {
		e.BeginArray()
		for _, t := range it.Tags {
			e.String(t)
		}
		e.EndArray()
	}
	e.Name(nActive)
	e.Bool(it.Active)
	e.EndObject()
	return e.Bytes()
}

// Catalog is an immutable set of items, ids 1 to Len. A new one is built
// and swapped in whole (see the catalog workload); nothing changes one.
type Catalog struct {
	Version int64
	items   []Item
}

// Get returns the item with the given id, or nil.
func (c *Catalog) Get(id int64) *Item {
	if id < 1 || id > int64(len(c.items)) {
		return nil
	}
	return &c.items[id-1]
}

// Len is the number of items.
func (c *Catalog) Len() int { return len(c.items) }

var (
	categories = [...]string{"books", "garden", "kitchen", "toys", "tools", "music", "sports", "office"}
	adjectives = [...]string{"Compact", "Deluxe", "Classic", "Rugged", "Silent", "Bright", "Folding", "Smart"}
	nouns      = [...]string{"Kettle", "Lamp", "Drill", "Chair", "Speaker", "Backpack", "Notebook", "Racket"}
	tagWords   = [...]string{"new", "sale", "eco", "gift", "bestseller", "café", "limited"}
)

// Generate returns a catalogue of n items, the same for the same n and
// version: a stand-in for the database a real API would load from.
func Generate(n int, version int64) *Catalog {
	c := &Catalog{Version: version, items: make([]Item, n)}
	x := uint64(version)*0x9e3779b97f4a7c15 + 1
	next := func() uint64 { // splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	for i := range c.items {
		r := next()
		it := &c.items[i]
		it.ID = int64(i + 1)
		it.SKU = "sku-" + pad6(i+1)
		it.Name = adjectives[r%8] + " " + nouns[r>>3%8]
		it.Category = categories[r>>6%8]
		it.PriceCents = int64(199 + r>>9%50000)
		it.Currency = "EUR"
		it.Stock = int(r >> 25 % 500)
		it.Rating = float64(r>>34%41+10) / 10 // 1.0 to 5.0
		for t := range r >> 40 % 4 {
			it.Tags = append(it.Tags, tagWords[(r>>(44+3*t))%uint64(len(tagWords))])
		}
		if it.Tags == nil {
			it.Tags = []string{}
		}
		it.Active = r>>60%8 != 0
	}
	return c
}

func pad6(n int) string {
	s := strconv.Itoa(n)
	for len(s) < 6 {
		s = "0" + s
	}
	return s
}

// ScoreRequest is the body of POST /v1/score.
type ScoreRequest struct {
	UserID   int64     `json:"user_id"`
	ItemID   int64     `json:"item_id"`
	Session  string    `json:"session"`
	Features []float64 `json:"features"`
	Country  string    `json:"country"`
	Premium  bool      `json:"premium"`
	Age      int       `json:"age"`
	MinScore float64   `json:"min_score"`
	Tags     []string  `json:"tags"`
	Explain  bool      `json:"explain"`
}

// MaxFeatures is how many features a ScoreRequest may carry.
const MaxFeatures = 64

// Validate returns what is wrong with r, or "" if nothing is. The
// messages are constants: validating allocates nothing.
func (r *ScoreRequest) Validate() string {
	switch {
	case r.UserID <= 0:
		return "user_id must be positive"
	case r.ItemID <= 0:
		return "item_id must be positive"
	case len(r.Features) == 0 || len(r.Features) > MaxFeatures:
		return "features must have 1 to 64 numbers"
	case len(r.Country) != 2 || !upper(r.Country):
		return "country must be two capital letters"
	case r.Age < 0 || r.Age > 150:
		return "age must be 0 to 150"
	case r.MinScore < 0 || r.MinScore > 1:
		return "min_score must be 0 to 1"
	case len(r.Session) > 64 || !utf8.ValidString(r.Session):
		return "session must be at most 64 bytes"
	case len(r.Tags) > 16:
		return "at most 16 tags"
	}
	return ""
}

func upper(s string) bool {
	for i := range len(s) {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return true
}

// ScoreResponse is the answer to POST /v1/score.
type ScoreResponse struct {
	UserID   int64   `json:"user_id"`
	ItemID   int64   `json:"item_id"`
	SKU      string  `json:"sku"`
	Score    float64 `json:"score"`
	Approved bool    `json:"approved"`
	Model    string  `json:"model"`
}

// Model names the scoring function, in every answer.
const Model = "logit-v1"

// Score is the model: a logistic function of the features, weighted by
// their position, the item's rating and price, and the customer.
func Score(r *ScoreRequest, it *Item) ScoreResponse {
	z := -1.0 + 0.4*it.Rating - float64(it.PriceCents)/100000
	for i, f := range r.Features {
		z += math.Tanh(f) / float64(i+2)
	}
	if r.Premium {
		z += 0.5
	}
	z -= float64(r.Age) / 200
	s := 1 / (1 + math.Exp(-z))
	s = math.Round(s*1e4) / 1e4
	return ScoreResponse{UserID: r.UserID, ItemID: it.ID, SKU: it.SKU, Score: s, Approved: s >= r.MinScore && it.Active, Model: Model}
}

var (
	nUserID, nItemID, nScore = jsonenc.NewName("user_id"), jsonenc.NewName("item_id"), jsonenc.NewName("score")
	nApproved, nModel        = jsonenc.NewName("approved"), jsonenc.NewName("model")
)

// AppendJSON appends the response's JSON to dst. A value receiver: with
// server.WriteJSON the response stays on the handler's stack.
func (s ScoreResponse) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Name(nUserID)
	e.Int(s.UserID)
	e.Name(nItemID)
	e.Int(s.ItemID)
	e.Name(nSKU)
	e.String(s.SKU)
	e.Name(nScore)
	e.Float64(s.Score)
	e.Name(nApproved)
	e.Bool(s.Approved)
	e.Name(nModel)
	e.String(s.Model)
	e.EndObject()
	return e.Bytes()
}

// ErrorBody is the JSON body of every error the API answers with:
// {"error":"...","offset":N} (offset only for a body that is not valid
// JSON, -1 meaning none).
type ErrorBody struct {
	Error  string
	Field  string
	Offset int
}

var nError, nField, nOffset = jsonenc.NewName("error"), jsonenc.NewName("field"), jsonenc.NewName("offset")

// AppendJSON appends {"error":...} with field and offset when set.
func (b ErrorBody) AppendJSON(dst []byte) []byte {
	e := jsonenc.NewEncoder(dst)
	e.BeginObject()
	e.Name(nError)
	e.String(b.Error)
	if b.Field != "" {
		e.Name(nField)
		e.String(b.Field)
	}
	if b.Offset >= 0 {
		e.Name(nOffset)
		e.Int(int64(b.Offset))
	}
	e.EndObject()
	return e.Bytes()
}

// SampleScoreBody is a valid /v1/score body, the one the benchmark posts.
const SampleScoreBody = `{"user_id":48213,"item_id":42,"session":"7f3a9c2e-1b4d-4e8f-9a6b-2c5d8e1f0a3b",` +
	`"features":[0.125,3.5,-1.25,42,0.001,7.75,2.5,-0.5],"country":"DE","premium":true,"age":34,` +
	`"min_score":0.25,"tags":["new","sale","caf\u00e9"],"explain":false}`
