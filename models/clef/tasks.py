"""The generic task families clef is trained on.

Each family is a question over everyday domains (weather, reviews, news, travel, ...)
with options, paraphrased criteria, evidence clauses per option and sentence frames.
The generator (``models.clef.data``) composes states from them. None of these tasks,
and none of their wording, is in the zero-shot evaluation suite (``models/zeroshot``:
ticket urgency, log anomaly, content moderation, support intent): the suite measures
transfer to tasks the model never saw.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """One question family: ``options`` maps an option name to clauses that show it."""

    name: str
    noun: str
    criteria: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    frames: tuple[str, ...]
    ordinal: bool = False


# Broad yes/no statements per family, true for a set of its options: bool questions in the
# wild usually name a category ("something is wrong", "needs attention"), not one option.
GROUPS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "weather": (("bad weather that keeps people indoors", ("rainy", "snowy", "windy", "foggy")),
                ("something is falling from the sky", ("rainy", "snowy"))),
    "review_sentiment": (("the customer complains about something", ("negative", "mixed")),
                         ("the reviewer is fully satisfied", ("positive",))),
    "news_topic": (("the story is about money or the economy", ("business",)),
                   ("the article concerns research or medicine", ("science", "health"))),
    "emotion": (("the writer feels bad: angry, sad or afraid", ("anger", "sadness", "fear")),
                ("a positive feeling is expressed", ("joy",))),
    "cuisine": (("the dish comes from asia", ("japanese", "indian")),),
    "transport": (("the trip involved leaving the ground or the land", ("plane", "boat")),
                  ("they travelled on two wheels or under their own power", ("bicycle",))),
    "animal": (("the animal lives in water or flies", ("fish", "bird")),),
    "music_genre": (("acoustic or orchestral music without amplification", ("classical", "country", "jazz")),),
    "movie_genre": (("the film is meant to frighten", ("horror",)), ("the film is based on real events", ("documentary",))),
    "room": (("a room with running water", ("kitchen", "bathroom")),),
    "temperature": (("it is uncomfortably cold", ("freezing", "cold")), ("it is above twenty degrees", ("warm", "hot"))),
    "size": (("too big to carry by hand", ("large", "huge")),),
    "price": (("it costs a lot of money", ("expensive",)),),
    "transaction": (("money left the account", ("withdrawal", "transfer", "card purchase")),),
    "vehicle_part": (("the car cannot be driven safely", ("brakes", "tyres")),),
    "plant_health": (("the plant has a problem that needs care", ("overwatered", "pests", "underwatered")),),
    "time_of_day": (("it is dark outside", ("night", "evening")),),
    "season": (("the cold half of the year", ("autumn", "winter")),),
    "formality": (("the message is polite and professional", ("formal",)),),
    "age_group": (("the person is a minor", ("child", "teenager")),),
    "quantity": (("there is at least one", ("few", "many")),),
    "speed": (("it took longer than expected", ("slow",)),),
    "injury_severity": (("the person needs hospital treatment", ("serious", "life-threatening")),
                        ("the injury is harmless", ("minor",))),
    "storm_warning": (("people should change their plans because of the weather", ("orange", "red")),),
    "inspection": (("the inspector found problems", ("re-inspect", "close")),),
    "loan_decision": (("there is a concern about the applicant", ("refer", "decline")),),
    "booking": (("the booking includes somewhere to sleep", ("hotel",)),),
    "sport": (("a ball game", ("football", "tennis", "basketball")),),
    "subject": (("a natural science", ("biology", "chemistry")),),
}


GENERIC_FRAMES = ("{x}.", "{x}!", "Note from {name}: {x}.", "{day}: {x}.", "Quick update, {x}.", "As {name} put it, {x}.")

TASKS: tuple[Task, ...] = (
    Task("weather", "weather", ("what is the weather like", "which weather conditions are described", "conditions outside"), {
        "sunny": ("the sky is clear and the sun is shining", "not a single cloud all day, bright sunshine", "we needed sunglasses, it was so bright",
                  "warm sunshine over the whole valley", "clear blue skies from morning to evening", "the sun came out and stayed out"),
        "rainy": ("it has been pouring since dawn", "bring an umbrella, showers all afternoon", "the streets are flooded after the downpour",
                  "steady drizzle kept everyone indoors", "heavy rain is drumming on the roof", "we got soaked walking home"),
        "snowy": ("fresh snow covers the roads", "a blizzard dropped twenty centimetres overnight", "the kids built a snowman in the yard",
                  "flakes keep falling and the ploughs are out", "everything is white after the snowfall", "we shovelled the driveway twice"),
        "windy": ("strong gusts knocked over the bins", "the wind is howling through the trees", "a gale is blowing along the coast",
                  "hold on to your hat, it is blustery", "the ferry was cancelled because of the storm winds", "leaves are flying everywhere in the gusts"),
        "foggy": ("thick fog hides the end of the street", "visibility is down to a few metres in the mist", "the bridge disappeared into the haze",
                  "drivers crawl through dense fog", "a grey mist hangs over the fields", "we could barely see the car in front"),
    }, ("In {city} {x}.", "Weather report for {city}: {x}.", "{day} in {city}, {x}.", "Out here {x}.")),
    Task("review_sentiment", "sentiment", ("how does the reviewer feel", "overall opinion of the review", "sentiment of this text"), {
        "positive": ("I absolutely loved it and would buy it again", "best purchase I made this year", "works perfectly and looks great",
                     "five stars, exceeded every expectation", "the staff were lovely and the food was delicious", "highly recommended to everyone"),
        "negative": ("it broke after two days and support never replied", "a complete waste of money", "terrible quality, I want my money back",
                     "the worst experience I have had in years", "cold food and rude waiters", "do not buy this, it is a disappointment"),
        "mixed": ("great screen but the battery is awful", "the room was nice although the service was slow", "some parts are good, others not so much",
                  "decent value, yet the design feels cheap", "I liked the story but hated the ending", "it does the job, with a few annoying flaws"),
    }, ("{x}.", "Review by {name}: {x}.", "My verdict: {x}.", "Bought it on {day}. {x}.")),
    Task("news_topic", "topic", ("what is this article about", "which section of the newspaper", "subject of the story"), {
        "sports": ("the home team won the championship final", "the striker scored twice in the second half", "the marathon record fell on sunday",
                   "the coach was sacked after five straight defeats", "the tennis star retired after the open"),
        "politics": ("parliament passed the new budget bill", "the minister resigned after the election", "voters head to the polls next week",
                     "the senate rejected the proposed amendment", "the opposition leader called for a referendum"),
        "technology": ("the company released a new smartphone chip", "a software update fixes the battery drain", "researchers built a faster quantum processor",
                       "the startup launched an app for sharing code", "cloud providers cut prices for storage"),
        "science": ("astronomers found a planet orbiting a nearby star", "the study measured how bees navigate", "biologists sequenced the genome of a rare frog",
                    "physicists observed a new particle decay", "the probe sent back images of the comet"),
        "business": ("shares rose after strong quarterly earnings", "the retailer announced a merger with its rival", "interest rates were raised again",
                     "the bank reported record profits", "the airline cut thousands of jobs to save costs"),
        "health": ("a new vaccine cut infections by half", "doctors warn about rising blood pressure in young adults", "the hospital opened a cancer ward",
                   "regular walking lowers the risk of heart disease", "the flu season arrived early this year"),
    }, ("{x}.", "Breaking: {x}.", "Reports from {city} say {x}.", "{day}'s headline: {x}.")),
    Task("emotion", "emotion", ("how is the writer feeling", "which emotion is expressed", "the author's mood"), {
        "joy": ("I am so happy I could dance", "we laughed all evening, what a wonderful day", "my heart is full, everything went right",
                "I got the job and I am over the moon", "this is the best news ever"),
        "anger": ("I am furious that they lied to me again", "this makes my blood boil", "how dare they treat us like that",
                  "I slammed the door, I was so mad", "I am fed up and livid"),
        "sadness": ("I miss her every single day", "I cried myself to sleep last night", "everything feels empty since he left",
                    "I feel so lonely and down", "the news broke my heart"),
        "fear": ("I am terrified of what the test will show", "my hands were shaking as the footsteps came closer", "I could not sleep, too scared to close my eyes",
                 "the thought of the flight fills me with dread", "I panicked when the lights went out"),
        "surprise": ("I could not believe my eyes when I opened the door", "wow, I never expected that at all", "they threw me a party out of nowhere",
                     "what a shock to see him there after ten years", "I was stunned by the result"),
    }, ("{x}.", "Diary, {day}: {x}.", "Honestly, {x}.", "{name} wrote: {x}.")),
    Task("cuisine", "cuisine", ("what kind of food is it", "which cuisine is described", "style of cooking"), {
        "italian": ("handmade pasta with basil and parmesan", "a wood-fired margherita pizza", "creamy risotto with porcini mushrooms",
                    "tiramisu and an espresso to finish", "lasagne layered with ragu and bechamel"),
        "japanese": ("fresh sushi and miso soup", "a steaming bowl of ramen with a soft egg", "tempura prawns with dipping sauce",
                     "grilled yakitori skewers and sake", "matcha ice cream for dessert"),
        "mexican": ("tacos al pastor with pineapple and salsa", "a burrito stuffed with beans and rice", "guacamole and tortilla chips",
                    "enchiladas covered in mole sauce", "churros dusted with cinnamon sugar"),
        "indian": ("butter chicken with garlic naan", "a fragrant biryani with cardamom", "spicy lentil dal and basmati rice",
                   "samosas with tamarind chutney", "paneer tikka from the tandoor"),
    }, ("We ordered {x}.", "Dinner tonight: {x}.", "{name} cooked {x}.", "The menu featured {x}.")),
    Task("transport", "mode of transport", ("how did they travel", "which means of transport", "way of getting there"), {
        "train": ("we caught the eight o'clock express from the central station", "the carriage was full and the conductor checked tickets",
                  "the railway line runs along the coast", "we changed trains at the junction"),
        "plane": ("the flight landed after nine hours in the air", "boarding closed at gate twelve", "turbulence shook the cabin over the ocean",
                  "we checked our bags at the airport"),
        "car": ("I drove the whole way on the motorway", "we stopped for fuel and snacks at a service station", "the traffic jam lasted an hour",
                "she parked the hatchback near the hotel"),
        "bicycle": ("I cycled along the river path", "pedalling uphill was exhausting", "I locked my bike outside the office",
                    "a flat tyre slowed down my ride"),
        "boat": ("the ferry crossed the bay in calm water", "we sailed to the island at sunrise", "the captain steered the ship into the harbour",
                 "waves splashed over the deck"),
    }, ("{x}.", "Getting to {city}: {x}.", "On {day} {x}.", "Trip notes: {x}.")),
    Task("animal", "animal", ("which animal is described", "what kind of pet", "the creature in the text"), {
        "dog": ("it wagged its tail and barked at the postman", "we took the puppy for a walk in the park", "he fetched the stick and dropped it at my feet"),
        "cat": ("it purred on my lap and ignored everyone", "the kitten chased a ball of yarn", "she meowed until we filled her bowl"),
        "bird": ("it sang from the branch every morning", "the parrot repeated every word we said", "it spread its wings and flew to the nest"),
        "fish": ("it swam in circles around the tank", "the goldfish nibbled the flakes at the surface", "its fins shimmered in the aquarium light"),
        "horse": ("it galloped across the field", "we brushed its mane and cleaned the hooves", "the mare trotted back to the stable"),
    }, ("{x}.", "About our pet: {x}.", "{name} told me {x}.")),
    Task("music_genre", "music genre", ("what kind of music", "which genre is playing", "style of the song"), {
        "rock": ("loud electric guitars and pounding drums", "the band smashed a guitar at the end of the set", "a distorted riff and a screaming solo"),
        "jazz": ("a saxophone improvised over a walking bass", "swing rhythm and brushed cymbals in a smoky club", "the trumpet player traded solos with the pianist"),
        "classical": ("the orchestra played a symphony by candlelight", "a string quartet performed a sonata", "the conductor raised the baton for the overture"),
        "hip hop": ("the rapper dropped verses over a heavy beat", "turntables scratched under the rhymes", "a freestyle battle with a booming bassline"),
        "country": ("a fiddle and a banjo told a story about a dusty ranch", "he sang about his pickup truck and home", "a steel guitar twanged through the ballad"),
    }, ("{x}.", "Last night's concert: {x}.", "On the radio, {x}.")),
    Task("movie_genre", "film genre", ("what kind of film", "which movie genre", "type of story on screen"), {
        "horror": ("a masked killer stalks teenagers in a cabin", "the haunted house creaks and a ghost appears", "blood on the walls and screams in the dark"),
        "comedy": ("two clumsy friends stumble from one hilarious mishap to another", "the audience laughed at every joke", "a silly prank goes hilariously wrong"),
        "romance": ("two strangers fall in love in paris", "a wedding, a broken heart and a kiss in the rain", "they write love letters across the years"),
        "science fiction": ("a starship travels to a distant galaxy", "robots rebel against their creators in the future", "time travellers try to prevent a war"),
        "documentary": ("real footage of penguins in antarctica with narration", "interviews with survivors of the flood", "the film follows farmers over one year"),
    }, ("{x}.", "The movie we watched: {x}.", "Plot: {x}.")),
    Task("room", "room", ("which room of the house", "where in the home", "part of the house"), {
        "kitchen": ("the oven is preheating next to the sink", "dishes are stacked by the fridge", "the kettle is boiling on the stove"),
        "bathroom": ("the shower is dripping next to the bathtub", "towels hang beside the mirror and toothbrushes", "the tiles around the toilet need cleaning"),
        "bedroom": ("the bed is unmade and clothes are on the wardrobe door", "the alarm clock sits on the nightstand", "pillows and a duvet cover the mattress"),
        "garage": ("the car is parked next to the toolbox", "the lawnmower and bicycles lean against the wall", "an oil stain on the concrete floor"),
        "garden": ("the roses are blooming along the fence", "the lawn needs mowing and the hedges trimming", "tomatoes grow in the vegetable beds"),
    }, ("{x}.", "At home, {x}.", "{name} noticed {x}.")),
    Task("sport", "sport", ("which sport is played", "what game", "the sport described"), {
        "football": ("the goalkeeper saved a penalty", "a corner kick found the striker's head", "the referee showed a red card for the tackle"),
        "tennis": ("an ace on match point at the net", "she won the set with a backhand down the line", "a double fault lost him the tiebreak"),
        "swimming": ("she won the butterfly in a pool record", "the relay team touched the wall first", "he swam fifty lengths of freestyle"),
        "basketball": ("a slam dunk at the buzzer", "he sank three-pointers all night", "the point guard dribbled past two defenders to the hoop"),
        "running": ("she finished the ten kilometre race in forty minutes", "he sprinted the last lap of the track", "runners crossed the finish line of the half marathon"),
    }, ("{x}.", "Match report: {x}.", "{day}: {x}.")),
    Task("temperature", "temperature", ("how warm is it", "temperature level", "how hot or cold"), {
        "freezing": ("the lake froze solid and pipes burst", "minus fifteen degrees and frost on the windows", "icicles hang from the roof"),
        "cold": ("we needed coats and scarves", "a chilly wind at eight degrees", "the heating is on and we still feel chilly"),
        "warm": ("a mild pleasant day in t-shirts", "twenty-two degrees, perfect for a picnic", "comfortably warm in the afternoon"),
        "hot": ("a scorching heatwave at forty degrees", "the asphalt is melting in the heat", "sweltering even in the shade"),
    }, ("{x}.", "In {city}, {x}.", "Today {x}."), ordinal=True),
    Task("size", "size", ("how big is it", "size of the item", "how large"), {
        "tiny": ("it fits on a fingertip", "smaller than a grain of rice", "you need a magnifying glass to see it"),
        "small": ("it fits in a pocket", "about the size of an apple", "a compact box you can carry in one hand"),
        "large": ("it barely fits through the door", "as big as a sofa", "we needed two people to carry it"),
        "huge": ("it is as tall as a building", "bigger than a football field", "a massive structure visible from miles away"),
    }, ("{x}.", "The package: {x}.", "{name} said {x}."), ordinal=True),
    Task("price", "price level", ("how expensive is it", "price range", "cost level"), {
        "cheap": ("it cost less than a cup of coffee", "a bargain at two dollars", "very affordable, almost free"),
        "moderate": ("fairly priced at around fifty dollars", "neither cheap nor pricey", "a reasonable mid-range price"),
        "expensive": ("it cost a fortune, thousands of dollars", "a luxury price tag", "way too pricey for most people"),
    }, ("{x}.", "At the shop: {x}.", "{name} paid for it; {x}."), ordinal=True),
    Task("transaction", "transaction type", ("what kind of transaction", "type of bank movement", "money movement"), {
        "deposit": ("a salary payment was credited to the account", "cash was paid in at the branch", "incoming funds added to the balance"),
        "withdrawal": ("cash was taken out at an atm", "money withdrawn from the savings account", "the teller handed over banknotes from the account"),
        "transfer": ("funds were sent to another account by wire", "money moved between checking and savings", "an iban transfer to a landlord"),
        "card purchase": ("the debit card was used at a supermarket", "a card payment at a petrol station", "a contactless payment in a bookshop"),
    }, ("{x}.", "Statement line: {x}.", "On {day} {x}.")),
    Task("booking", "booking", ("what was booked", "type of reservation", "kind of booking"), {
        "flight": ("seat 14A on the morning departure to {city}", "a return ticket with one checked bag", "the boarding pass for the evening departure"),
        "hotel": ("a double room for three nights with breakfast", "check-in from 3 pm, room with a sea view", "a suite at the grand hotel"),
        "car rental": ("a compact car picked up at the airport desk", "the rental comes with unlimited mileage", "return the vehicle with a full tank"),
        "restaurant": ("a table for four at eight pm", "dinner reservation by the window", "the chef's tasting menu for two"),
    }, ("Confirmation: {x}.", "{x}.", "Your reservation: {x}.")),
    Task("vehicle_part", "car part", ("which part of the car", "what part of the vehicle is involved", "car component"), {
        "engine": ("the engine misfires and smoke comes from the bonnet", "the motor overheats on the highway", "a knocking noise from the cylinders"),
        "brakes": ("the pedal feels soft when stopping", "squealing when I stop at lights", "the car pulls to one side when braking"),
        "tyres": ("a nail punctured the front tyre", "the tread is worn down", "the wheel keeps losing air pressure"),
        "battery": ("the car will not start in the morning, just clicks", "the dashboard lights flicker and die", "jump-start needed every day"),
    }, ("{x}.", "Workshop note: {x}.", "{name} reports {x}.")),
    Task("plant_health", "plant condition", ("how is the plant doing", "condition of the plant", "plant health"), {
        "healthy": ("green glossy leaves and new shoots every week", "it is thriving and flowering", "strong stems and lush foliage"),
        "overwatered": ("the soil is soggy and the roots are rotting", "yellow leaves and standing water in the pot", "mushy stems from too much watering"),
        "pests": ("tiny aphids cover the undersides of the leaves", "something is chewing holes in the foliage", "webs from spider mites on every branch"),
        "underwatered": ("the leaves are crispy and brown at the edges", "the soil is bone dry and cracked", "it droops until I give it water"),
    }, ("{x}.", "My fern: {x}.", "Garden log: {x}.")),
    Task("time_of_day", "time of day", ("when does this happen", "what time of day", "part of the day"), {
        "morning": ("the alarm rang at six and I had breakfast", "sunrise over the rooftops and the first coffee", "we left before the early commute"),
        "afternoon": ("after lunch we went for a walk", "around three o'clock the meeting started", "the afternoon sun warmed the office"),
        "evening": ("after work we cooked dinner", "the sunset turned the sky orange", "we watched a film before bed"),
        "night": ("at midnight the streets were empty", "the stars were out and everyone was asleep", "I woke at three am and could not sleep"),
    }, ("{x}.", "{day}: {x}.", "{name} remembers {x}.")),
    Task("season", "season", ("which season is it", "time of year", "what season"), {
        "spring": ("the cherry blossoms are opening and lambs are in the fields", "the first tulips after the thaw", "birds return and the days grow longer"),
        "summer": ("long beach days and ice cream", "school is out and the pool is open", "barbecues under the midsummer sun"),
        "autumn": ("leaves turn red and fall from the trees", "we picked apples and pumpkins", "the harvest is in and the nights draw in"),
        "winter": ("we hung decorations and lit the fire", "short dark days and frosty mornings", "the ski season opened"),
    }, ("{x}.", "This time of year {x}.", "In {city}, {x}.")),
    Task("formality", "register", ("how formal is the writing", "tone of the message", "register of the text"), {
        "formal": ("Dear Sir or Madam, I am writing to request the enclosed documents", "we kindly ask that you confirm receipt at your earliest convenience",
                   "please accept my sincere apologies for any inconvenience caused"),
        "casual": ("hey, wanna grab pizza later lol", "yo that was awesome, see ya", "omg thanks so much, you rock"),
    }, ("{x}.", "{x}")),
    Task("age_group", "age group", ("how old is the person", "age group described", "which stage of life"), {
        "child": ("she is seven and just lost her first tooth", "he plays with toy cars at kindergarten", "the little boy learned to ride without training wheels"),
        "teenager": ("he is sixteen and studying for his school exams", "she got her first phone at thirteen", "the teen spends all night gaming"),
        "adult": ("she is thirty-five with a mortgage and a full-time job", "he turned forty and manages a team", "a parent of two commuting to the office"),
        "elderly": ("he is eighty-two and enjoys his pension", "grandma celebrated her ninetieth birthday", "the retired teacher walks with a cane"),
    }, ("{x}.", "About {name}: {x}.", "{x}, according to the family."), ordinal=True),
    Task("subject", "school subject", ("which school subject", "what subject is studied", "area of study"), {
        "mathematics": ("we solved quadratic equations and proved a theorem", "homework on fractions and derivatives", "the exam covers geometry and algebra"),
        "history": ("we studied the fall of the roman empire", "an essay about the industrial revolution", "the lesson covered medieval kings and battles"),
        "biology": ("we looked at cells under a microscope", "the chapter explains photosynthesis and genes", "we dissected a frog in the lab"),
        "literature": ("we read a novel and discussed its characters", "an essay on the poems of the romantic era", "the play's themes of ambition and guilt"),
        "chemistry": ("the acid reacted with the metal and bubbled", "balancing equations for combustion", "titration in the lab with a burette"),
    }, ("{x}.", "In class on {day}, {x}.", "Study notes: {x}.")),
    Task("quantity", "amount", ("how many are there", "amount mentioned", "quantity"), {
        "none": ("there were none left at all", "not a single one remained", "the shelf was completely empty"),
        "few": ("only a handful were left", "just two or three remained", "a couple of them, no more"),
        "many": ("there were hundreds of them", "the hall was packed with countless people", "too many to count"),
    }, ("{x}.", "At the store, {x}.", "{name} counted; {x}."), ordinal=True),
    Task("injury_severity", "injury severity", ("how badly is the person hurt", "severity of the injury", "how serious is the harm"), {
        "minor": ("a small scrape on the knee, a plaster was enough", "a bruise that will fade in a few days", "a paper cut, no treatment needed"),
        "moderate": ("a sprained ankle that needs a brace for two weeks", "a cut that needed four stitches", "a mild concussion, sent home to rest"),
        "serious": ("a broken leg that needs surgery", "deep burns on both arms, admitted to hospital", "several fractured ribs and a week on the ward"),
        "life-threatening": ("unconscious and not breathing, resuscitation under way", "massive bleeding after the crash, rushed to intensive care",
                             "cardiac arrest on the pitch, the defibrillator was used"),
    }, ("{x}.", "Incident report: {x}.", "{name} was at the scene: {x}."), ordinal=True),
    Task("storm_warning", "warning level", ("which warning level applies", "how dangerous is the forecast", "alert level for the region"), {
        "green": ("light breeze and a few clouds, no hazards expected", "a calm night with normal conditions", "nothing unusual in the outlook"),
        "yellow": ("some gusty showers may disrupt outdoor plans", "brief thunder possible, be aware", "slippery roads in places this morning"),
        "orange": ("severe gales may bring down trees and cut power", "flooding of low roads is likely, avoid travel if you can",
                   "large hail could damage cars and roofs"),
        "red": ("a hurricane will make landfall, evacuate the coast now", "extreme flooding threatens lives, move to higher ground",
                "catastrophic winds expected, stay indoors and away from windows"),
    }, ("{x}.", "Forecast for {city}: {x}.", "Met office, {day}: {x}."), ordinal=True),
    Task("inspection", "inspection outcome", ("result of the hygiene inspection", "what should the inspector decide", "outcome for the kitchen"), {
        "pass": ("the kitchen was spotless and fridges at the right temperature", "records complete, staff trained, nothing to note",
                 "clean surfaces, labelled food, hand basins stocked"),
        "re-inspect": ("a few labels missing and one fridge slightly too warm", "the floor behind the oven needs cleaning, come back in a month",
                       "cleaning logs incomplete for last week"),
        "close": ("rats seen in the storeroom and raw meat dripping onto salads", "no hot water and sewage on the kitchen floor",
                  "mould on the food and several diners fell ill"),
    }, ("{x}.", "Inspector's notes: {x}.", "Visit on {day}: {x}.")),
    Task("loan_decision", "loan decision", ("what should happen to the application", "decision on the loan", "lender's decision"), {
        "approve": ("stable income for ten years and a spotless credit history", "low debt, large deposit and steady salary",
                    "the applicant has never missed a payment and earns well"),
        "refer": ("income is fine but the employment history is short", "one missed payment two years ago, otherwise good",
                  "self-employed with irregular but decent earnings"),
        "decline": ("several defaults and a recent bankruptcy", "no income and large unpaid debts", "the documents appear to be forged"),
    }, ("{x}.", "Application from {name}: {x}.", "Underwriter note: {x}.")),
    Task("speed", "speed", ("how fast was it", "pace", "speed described"), {
        "slow": ("it crawled along at walking pace", "the queue barely moved for an hour", "as slow as a snail"),
        "moderate": ("a steady, unhurried pace", "about average speed, nothing special", "it kept a comfortable medium tempo"),
        "fast": ("it raced past in a blur", "lightning quick, done in seconds", "at full speed down the hill"),
    }, ("{x}.", "Observed: {x}.", "{name} said {x}."), ordinal=True),
)

# Sentences that carry no answer to any task: they make states longer and teach the
# model that evidence can sit anywhere among irrelevant text.
FILLERS = (
    "More details will follow later.", "Thanks for reading.", "This was written on a phone.", "See the attached notes.",
    "Let me know what you think.", "I will check again tomorrow.", "Reference number {num}.", "Posted by {name}.",
    "Nothing else to add for now.", "The meeting is moved to {day}.", "Copying {name} for visibility.", "Page {num} of the report.",
    "Forwarded from the shared inbox.", "Sent from {city}.", "Remember to bring the forms.", "Regards, {name}.",
    "The office closes at five.", "Version {num} of this note.", "Apologies for the short message.", "Call me if needed.",
)

NAMES = ("Alice", "Bram", "Chen", "Dana", "Emeka", "Fatima", "Goran", "Hana", "Ivo", "Jules", "Kofi", "Lena", "Mateo", "Nora",
         "Omar", "Priya", "Quinn", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Yara", "Zoe")
CITIES = ("Lisbon", "Oslo", "Nairobi", "Osaka", "Lima", "Toronto", "Krakow", "Hanoi", "Dublin", "Porto", "Cairo", "Austin",
          "Lyon", "Quito", "Perth", "Tbilisi")
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "Yesterday", "Last week")

# Bool criteria written from an option: the statement to check, in several forms.
BOOL_TEMPLATES = ("is the {noun} {opt}?", "the {noun} is {opt}", "does the text describe {opt}?", "{opt}", "{noun}: {opt}",
                  "is this about {opt}?", "mentions {opt}")
